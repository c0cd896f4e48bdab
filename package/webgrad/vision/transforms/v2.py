"""torchvision.transforms.v2: the same transforms (webgrad's take tensors and PIL images alike), plus v2's ToImage
and ToDtype."""

from . import (CenterCrop, ColorJitter, Compose, ConvertImageDtype, Grayscale, InterpolationMode, Lambda, Normalize,
               Pad, PILToTensor, RandomApply, RandomChoice, RandomCrop, RandomErasing, RandomGrayscale,
               RandomHorizontalFlip, RandomOrder, RandomResizedCrop, RandomVerticalFlip, Resize, ToDtype, ToImage,
               ToPILImage, ToTensor, functional)

__all__ = ["CenterCrop", "ColorJitter", "Compose", "ConvertImageDtype", "Grayscale", "InterpolationMode", "Lambda",
           "Normalize", "Pad", "PILToTensor", "RandomApply", "RandomChoice", "RandomCrop", "RandomErasing",
           "RandomGrayscale", "RandomHorizontalFlip", "RandomOrder", "RandomResizedCrop", "RandomVerticalFlip",
           "Resize", "ToDtype", "ToImage", "ToPILImage", "ToTensor", "functional"]
