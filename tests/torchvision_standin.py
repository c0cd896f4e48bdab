"""A tiny stand-in for the part of torchvision that PyTorch's MNIST examples use, for the example-script
tests: datasets.MNIST (synthetic 28x28 digits, deterministic, no download) and transforms.Compose /
ToTensor / Normalize. The images are drawn so that the label is learnable: digit k lights row band k."""

import webgrad as wg


class transforms:
    class Compose:
        def __init__(self, steps):
            self.steps = steps

        def __call__(self, x):
            for step in self.steps:
                x = step(x)
            return x

    class ToTensor:
        def __call__(self, image):  # uint8 [28, 28] -> float [1, 28, 28] in [0, 1]
            return image.float().div(255.0).unsqueeze(0)

    class Normalize:
        def __init__(self, mean, std):
            self.mean, self.std = mean[0], std[0]

        def __call__(self, x):
            return (x - self.mean) / self.std


class datasets:
    class MNIST(wg.utils.data.Dataset):
        def __init__(self, root, train=True, download=False, transform=None, size=None):
            n = size or (24 if train else 16)
            gen = wg.Generator().manual_seed(1 if train else 2)
            self.targets = wg.randint(0, 10, (n,), generator=gen)
            noise = (wg.rand(n, 28, 28, generator=gen) * 60).to(wg.uint8)
            rows = wg.arange(28).reshape(1, 28, 1)
            band = ((rows // 3) == self.targets.reshape(n, 1, 1)).to(wg.uint8) * 180
            self.data = (noise + band).to(wg.uint8)
            self.transform = transform

        def __len__(self):
            return len(self.targets)

        def __getitem__(self, i):
            image = self.data[i]
            return (self.transform(image) if self.transform else image), int(self.targets[i])


datasets.FashionMNIST = datasets.MNIST  # the same synthetic images: only the loading API matters here
ToTensor = transforms.ToTensor  # `from torchvision.transforms import ToTensor`
