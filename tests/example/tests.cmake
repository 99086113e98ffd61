# The main example trains to the accuracy the README promises.
add_test(NAME example_digits_mlp
         COMMAND digits_mlp ${PROJECT_SOURCE_DIR}/examples/data/digits --min-accuracy 0.90)
