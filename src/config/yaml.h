/* src/config/yaml.h — YAML experiment configs (yaml.c), read with libyaml
 * into the JSON tree that the config loader walks. Internal to ctrial. */
#ifndef CTRIAL_CONFIG_YAML_H
#define CTRIAL_CONFIG_YAML_H

#include <stddef.h>

#include <jansson.h>

/* The one YAML document in text[0, len) as JSON: a NEW reference to an
 * object, or NULL + CT_ECONFIG "label:line:column: why" (a syntax error, a
 * duplicate key, a non-scalar key, .inf or .nan, more than one document,
 * a document that is not a mapping, nesting past 64, more than a million
 * values once aliases are expanded) or CT_ENOMEM. */
json_t *cti_yaml_to_json(const char *text, size_t len, const char *label);

#endif
