#!/usr/bin/env python3
"""Regenerates tiny_mlp_scripted.pt, the TorchScript module of the model tests.

    /usr/bin/python3 tests/data/model/make_tiny_mlp_scripted.py

A 2-layer MLP, 4 features -> 16 hidden -> 3 classes, with one parameter
directly on the root module (`scale`) so the tests see the extra `root` unit
and a parameterless child (`act`) that is not a unit. Saved with Debian's
python3-torch 1.13 so that LibTorch 1.13 and 2.x both load it.
"""
import os

import torch
from torch import nn


class TinyMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.fc1 = nn.Linear(4, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


def main():
    torch.manual_seed(0)
    module = torch.jit.script(TinyMlp())
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_mlp_scripted.pt")
    module.save(out)
    print(out)


if __name__ == "__main__":
    main()
