"""PyTorch's own image loading on a JPEG folder, the peer of runner-host's
loader in bench_data.sh (issue 40, item 6).

  /usr/bin/python3 tools/bench/data_peer.py ROOT [--workers 2] [--batch-size 64]
                                            [--epochs 3] [--seed 0]

torchvision.datasets.ImageFolder(ROOT) (class sub-folders: the layout
MMPretrain's CustomDataset reads) with ImageNet's training transforms:
RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet
mean, std), through torch.utils.data.DataLoader(batch_size, num_workers,
shuffle=True, drop_last=True, persistent_workers when there are workers).
Debian 12's python3-torchvision 0.14 on torch 1.13, PIL 9.4 (which decodes
with libjpeg-turbo, as runner-host does).

Cores: each worker is a process that decodes, transforms and collates whole
batches, one thread each (DataLoader's workers call torch.set_num_threads(1)
themselves; set here too for the main process, which only receives the
batches): --workers N keeps N cores busy, as runner-host's N loader threads
do. With --workers 0 the main process loads, as runner-host's num_workers 0.

An epoch is timed from iter(loader) to its last batch, the batches taken and
dropped. The first epoch is a warm-up and not counted (it starts the worker
processes, which persistent_workers keeps for the next epochs; runner-host's
first epoch is left out alike); printed: every epoch's images/s and
`torchvision DataLoader: <images/s> images/s`, the median of the others.
"""
import argparse
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

IMAGENET_MEAN = [0.485, 0.456, 0.406]  # = runner-host's [123.675, 116.28, 103.53] / 255
IMAGENET_STD = [0.229, 0.224, 0.225]  # = [58.395, 57.12, 57.375] / 255


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="the image folder (ROOT/<class>/<file>)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3, help="the first is a warm-up (>= 2)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.workers < 0 or a.batch_size < 1 or a.epochs < 2:
        p.error("--workers >= 0, --batch-size >= 1, --epochs >= 2")

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])
    dataset = datasets.ImageFolder(a.root, transform=transform)
    loader = DataLoader(dataset, batch_size=a.batch_size, shuffle=True, drop_last=True,
                        num_workers=a.workers, persistent_workers=a.workers > 0)
    print(f"torchvision {__import__('torchvision').__version__} ImageFolder {a.root}: "
          f"{len(dataset)} images, batch {a.batch_size}, {a.workers} workers, drop_last")
    rates = []
    for epoch in range(a.epochs):
        images = 0
        start = time.monotonic()
        for inputs, _ in loader:
            images += inputs.shape[0]
        rate = images / (time.monotonic() - start)
        print(f"epoch {epoch + 1}{' (warm-up)' if epoch == 0 else ''}: {rate:.1f} images/s",
              flush=True)
        if epoch > 0:
            rates.append(rate)
    print(f"torchvision DataLoader: {statistics.median(rates):.1f} images/s "
          f"(median of the epoch{'s' if len(rates) > 1 else ''} after the warm-up)")


if __name__ == "__main__":
    sys.exit(main())
