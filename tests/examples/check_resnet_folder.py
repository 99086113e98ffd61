"""examples/resnet on image folders (resnet_folder.json) against torchvision.

    check_resnet_folder.py RESNET

The bundled digits are written out as an image folder of PNG files
(training) and one of JPEG files (validation) by
examples/resnet/digit_folders.py. resnet_folder.json cut to 10 batches of
16 (a report every 5, a validation and a checkpoint at 10) trains on them
through ct_main with 2 loader workers, and:

1. its training losses equal bench/gpu/torch_eager.py's `resnet_folder`
   workload to 1e-5 relative: ImageFolder read with decode_image, the
   training set's mean/std, RandomResizedCrop + ColorJitter + ToTensor +
   Normalize from torchvision.transforms.v2 after
   torch.manual_seed(record_seed(seed, pass, index)), the same batches and
   torchvision's resnet18 with the same initial weights;
2. the checkpoint's model, loaded into torchvision.models.resnet18 (strict),
   on the validation folder through Resize + ToTensor + Normalize, gives the
   validation_loss (1e-5 relative) and validation_accuracy ctrial reported.

Runs from the source tree, writes under <build>/tests/examples/resnet_folder.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_resnet import SRC, check_losses, check_validation, train_cut  # noqa: E402


def main():
    folders = []

    def use_folders(cfg, work):  # the digits written out as image folders
        root = os.path.join(work, "digits")
        subprocess.run([sys.executable, os.path.join(SRC, "examples", "resnet", "digit_folders.py"), root],
                       check=True)
        cfg["data"].update(train_folder=os.path.join(root, "train"), val_folder=os.path.join(root, "val"),
                           workers=2)
        folders.append(root)

    cfg, config, out, ours, val = train_cut(sys.argv[1], "resnet_folder", "resnet_folder.json", use_folders)
    check_losses(ours, "resnet_folder", config, folders[0])

    import torch
    import torch_eager as te

    torch.set_num_threads(1)
    twin = te.ResNetFolder(cfg["hyperparameters"], folders[0], 0, torch.device("cpu"), False, False)
    x = torch.stack([twin.evaluate(img) for img, _ in twin.val])
    check_validation(out, val, x, torch.tensor(twin.val.targets))
    print("ok: the same training losses as torchvision's resnet18 on the augmented image folders, and the "
          "same validation from the checkpoint")


if __name__ == "__main__":
    main()
