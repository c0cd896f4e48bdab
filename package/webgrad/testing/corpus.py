"""Real PyTorch training scripts, written by others and never tuned for webgrad, run unchanged under
``webgrad.as_torch()`` and compared with the real torch.

    python -m webgrad.testing.corpus [--device cpu|webgpu] [--only NAME ...] [--torch] [--root DIR] [--verbose]
    python -m webgrad.testing.corpus --record              # record the real torch's losses (needs torch)
    python -m webgrad.testing.corpus --write-manifest      # record the corpus files' sources and hashes
    python -m webgrad.testing.corpus --lib torch           # check that the corpus itself runs on the real torch

The corpus lives in ``tests/compat/corpus/<name>/``: each script with its sibling modules, unchanged but for a first
line naming its source (the third-party files stay out of commits; ``tests/compat/corpus_manifest.json`` names each
file's source and SHA-256). Every script runs in a fresh interpreter, in a temporary copy of its folder, with:

- ``tests/compat/standin/`` first on ``sys.path``: torchvision (datasets reading local files, transforms, utils,
  resnet18), matplotlib (draws nothing), requests (serves mapped URLs from local files), torchviz (make_dot walks
  the autograd graph, draws nothing), tiktoken (GPT-2's encodings, byte by byte, with nothing downloaded) and tqdm
  (draws no bar), the same under both libraries;
- stand-in data that ``tests/compat/corpus_data.py`` writes in the format the script reads (SCRIPTS[...].data);
- ``random``, ``numpy.random`` and the library's own generator seeded, ``PYTHONHASHSEED=0``, one thread;
- with ``--device webgpu``, webgrad's default device set to ``webgpu`` and the script's own accelerator flag
  (``accel_args``) passed; on the CPU its ``cpu_args`` (``--no-accel``...). The real torch always runs on the CPU,
  so a script whose accelerator path loads data otherwise (``accel_changes_data``: shuffling, workers) is only
  checked for finite losses on webgpu.

Runs are capped through each script's own flags (``args``). Where a script has no flags, the table says which
mechanism caps it: ``overrides`` replaces the value of named constant assignments (``epochs = 5``, or a config dict
``GPT_CONFIG = {...}`` given whole) at module level or directly under ``if __name__ == "__main__":`` when the script
is compiled (the file is not touched; a name that matches nothing is an error, so the table cannot drift from the
text), ``calls`` replaces literal arguments of calls made at those places, named by function or method (a tutorial's
``trainIters(encoder, decoder, 75000, print_every=5000)``, ``timer.timeit(100)``; a call named by its text,
``range(5000)``, is that call alone, as a loop's ``for epoch in range(5000):``: by position or keyword, an argument
or call that is not there being an error too), ``max_backward`` ends the run cleanly after N ``Tensor.backward``
calls, and the data stand-in's size bounds an epoch. A script whose instructions say to run a sibling script first
(one that writes its data) names it in ``prepare``, with that script's own overrides: both run in the same
interpreter, under the same library. ``env`` sets environment variables a script's readme asks for
(``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` for a script written before ``torch.load`` turned to weights only).
``then`` names a function the file defines and calls once it has run: a model file's own ``test()`` (building the
model and running a forward pass), whose call its last line leaves commented out, or a repository's test function.
``terminal`` gives a script that reads its terminal's size (``stty size``, for a progress bar) a pseudo-terminal of
24 rows and 80 columns as its standard input (every other script reads an empty one, however the runner was started).

Losses are the numbers the script prints (``loss_re``). How a run is judged (``compare``):

- ``exact``: same losses as the real torch within ``rtol``/``atol`` (plus the printed rounding). Both libraries
  then draw their random numbers from one shared NumPy source (the ``torch.rand*``/``randperm``/``normal``/
  ``multinomial`` functions, ``Tensor.uniform_``/``normal_``/``bernoulli_``, dropout, the DataLoader's shuffling,
  ``Categorical.sample``), so parameter initialisation, batches, masks and sampled actions are identical (the real
  functions of webgrad are then not the ones exercised; a name webgrad lacks is not added). With no torch run or
  recorded one, only finiteness is checked.
- ``trend``: no torch run to compare with (its randomness cannot be shared, as ``Dropout2d``'s, or the real torch
  cannot run it here): the losses must be finite and fall (the mean of the second half below that of the first
  half, or the last below the first).
- ``runs``: finite losses only (GANs, whose losses need not fall in a few steps; Hogwild's racing processes). A
  script that prints no number worth judging (a recipe that saves and loads a checkpoint) has ``loss_re=None``:
  that it completes is the verdict.
- ``output``: for scripts that teach by printing (tensors, ``requires_grad`` flags, ``grad_fn`` names, shapes,
  state dicts) rather than by training: the numbers ``loss_re`` captures (by default every number printed) are
  compared as ``exact``'s, and the rest of the output must read as torch's, line for line, once those numbers, the
  object addresses (``0x7f...``) and the lines ``ignore_re`` matches (timings) are masked. Its random numbers are
  shared as ``exact``'s unless ``shared_random`` is False (a script drawing from a 'meta' tensor of 2**48
  elements, which NumPy would have to fill).

Recorded torch losses (``tests/compat/corpus_reference.json``, written by ``--record`` with the real torch) stand in
for a torch run while their key (a hash of the table entry, the script's files, the data generator, the stand-ins
and the shared random source) still matches; ``--torch`` always runs torch afresh. A table field added later is
hashed only where it is set (UNSET_UNHASHED), and a stand-in added for a new script only into the keys of the
scripts that import it (OPTIONAL_STANDINS), so neither stales the recorded keys of the others.

Each script prints one line (``ok`` or ``FAIL`` with the first error: exception, message and the script line that
raised it), then ``corpus DEVICE: ok N of M``.

Restoring the corpus in a fresh checkout: ``tests/compat/corpus/`` holds only its ``.gitignore``. For each entry of
``tests/compat/corpus_manifest.json`` (``corpus/<folder>/<file>`` -> source, licence, SHA-256), take the file at the
GitHub blob URL its source names (``github.com/OWNER/REPO/blob/COMMIT/PATH``: ``git clone`` the repository and ``git
show COMMIT:PATH``, or the raw file at that commit) and write ``tests/compat/corpus/<folder>/<file>`` as the line
``# source: <source as the manifest spells it>`` followed by the file's text, byte for byte. ``verify_manifest()``
(and ``test_corpus_files_are_the_published_ones``) then returns no problem; a file that differs is reported
``changed``, one not written ``missing``. Nothing here downloads: the runner and the tests only read local files.
"""

import argparse
import ast
import builtins
import importlib.util
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field

# "loss" (or Loss, loss_train, d_loss...) then at most a few non-alphanumerics, then a number
NUMBER_RE = r"(?<![\w.])([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:e[-+]?\d+)?|nan|inf)(?![\w.])"  # compare='output'
LOSS_RE = r"(?i)loss\w*\W{0,4}?\s*([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:e[-+]?\d+)?|nan|inf)"
STEP_LOSS_RE = r"(?m)^\d+ ([-+]?\d+\.?\d*(?:e[-+]?\d+)?|nan|inf)$"  # `print(t, loss.item())`
WORKDIR = os.path.join("run", "here")  # scripts run two levels deep, so "../data" and "../../data" stay inside


@dataclass
class Script:
    """How to run one corpus script. `folder` defaults to the table key; several entries may share a folder."""

    entry: str
    source: str  # the entry file's origin (also its first line); sibling files name their own
    args: list = field(default_factory=list)
    cpu_args: list = field(default_factory=list)  # added on the CPU (e.g. --no-accel) ...
    accel_args: list = field(default_factory=list)  # ... or on --device webgpu (e.g. --accel)
    data: list = field(default_factory=list)  # (kind, path relative to the working directory, options)
    urls: dict = field(default_factory=dict)  # URL -> local path, served by the requests stand-in
    overrides: dict = field(default_factory=dict)  # constant NAME -> value, for scripts without flags
    calls: dict = field(default_factory=dict)  # called NAME -> {position or keyword: value}, likewise
    prepare: list = field(default_factory=list)  # (sibling script, its overrides) run first, as its readme says
    env: dict = field(default_factory=dict)  # environment variables its readme asks for
    terminal: bool = None  # it asks its terminal's size (`stty size`): its stdin is a 24 x 80 pseudo-terminal
    then: str = None  # a function of the script called once it has run: its own self-test, whose call the file
    #                   leaves commented out (`# test()`) or which a test runner would call (`test_vit()`)
    max_backward: int = None
    compare: str = "exact"  # exact | output | trend | runs
    rtol: float = 2e-3
    atol: float = 1e-5
    loss_re: str = LOSS_RE  # None: no number to judge by (compare='runs' only)
    ignore_re: str = None  # compare='output': lines left out of the comparison (timings)
    shared_random: bool = None  # None: as compare is 'exact' or 'output'
    timeout: float = 180.0  # generous: on a loaded machine a 1-second run can take 30
    mkdirs: list = field(default_factory=list)
    accel_changes_data: bool = False  # its accelerator path loads data differently (shuffle, workers): on webgpu
    #                                   the losses are checked for finiteness, not compared with torch's CPU run
    folder: str = None
    kind: str = ""  # what it trains, for the report
    note: str = ""  # why the settings are what they are

    def __post_init__(self):
        if self.compare == "output" and self.loss_re == LOSS_RE:
            self.loss_re = NUMBER_RE
        if self.loss_re is None and self.compare != "runs":
            raise ValueError(f"{self.entry}: loss_re=None (no number to judge by) needs compare='runs'")

    @property
    def shares_random(self):
        """Whether both libraries draw from one NumPy source (see the module docstring)."""
        return self.compare in ("exact", "output") if self.shared_random is None else self.shared_random


EX = "https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
TUT = "https://github.com/pytorch/tutorials/blob/"
RECIPES = "0a7e68666de5faceafa90276ad2b7874cd32c5e0/recipes_source/recipes/"
YJ = "https://github.com/yunjey/pytorch-tutorial/blob/0500d3df5a2a8080ccfccbc00aca0eacc21818db/tutorials/"
PG = "https://github.com/eriklindernoren/PyTorch-GAN/blob/36d3c77e5ff20ebe0aeefd322326a134a279b93e/implementations/"
JJ = "https://github.com/jcjohnson/pytorch-examples/blob/0003fcdc606a79951e53bf8f46f8574fa4739f23/"
MZ = "https://github.com/MorvanZhou/PyTorch-Tutorial/blob/dbe154a9e56635e51c6b0c2ccea8ae36cfb585a7/tutorial-contents/"
MINGPT = "https://github.com/karpathy/minGPT/blob/37baab71b9abea1b76ab957409a1cc2fbfba8a26/"
NGVL = "https://github.com/karpathy/ng-video-lecture/blob/52201428ed7b46804849dea0b3ccf0de9df1a5c3/"
LLM = "https://github.com/rasbt/LLMs-from-scratch/blob/28c65cdfbc3338e2e040016eea4b7fdf556e4d57/"
AP = "https://github.com/aladdinpersson/Machine-Learning-Collection/blob/"
NLP = "https://github.com/graykode/nlp-tutorial/blob/d05e31ec81d56d70c1db89b99ab07e948f7ebc11/"
KC = "https://github.com/kuangliu/pytorch-cifar/blob/49b7aa97b0c12fe0d4054e670403a16b6b834ddd/"
HK = "https://github.com/hunkim/PyTorchZeroToAll/blob/e5a260fac0b4ff1e2ec434fc6f0d962ac97fc289/"
VITP = "https://github.com/lucidrains/vit-pytorch/blob/69d24fe9e3024c0d4b02761123b8583a24ebed1e/"
CORA_URL = "https://linqs-data.soe.ucsc.edu/public/lbc/cora.tgz"

MNIST_UP = [("mnist", "../data", {"train": 48, "test": 24})]
MNIST_UP2 = [("mnist", "../../data", {"train": 48, "test": 24})]

SCRIPTS = {
    # ------------------------------------------------------------------------------------------ pytorch/examples
    "ex_mnist": Script(
        "main.py", EX + "mnist/main.py", kind="CNN, Adadelta, StepLR",
        args=["--epochs", "2", "--batch-size", "16", "--test-batch-size", "24", "--log-interval", "1"],
        cpu_args=["--no-accel"], data=MNIST_UP, accel_changes_data=True),
    "ex_mnist_rnn": Script(
        "main.py", EX + "mnist_rnn/main.py", kind="LSTM, BatchNorm1d, Dropout2d",
        args=["--epochs", "2", "--batch-size", "16", "--test-batch-size", "24", "--log-interval", "1"],
        accel_args=["--accel"], data=MNIST_UP, compare="trend", note="Dropout2d on a 2-d input"),
    "ex_mnist_forward_forward": Script(
        "main.py", EX + "mnist_forward_forward/main.py", kind="forward-forward MLP, Adam",
        args=["--epochs", "6", "--train_size", "48", "--test_size", "24", "--log-interval", "2"],
        cpu_args=["--no_accel"], data=[("mnist", "data", {"train": 48, "test": 24})], accel_changes_data=True),
    "ex_word_language_model": Script(
        "main.py", EX + "word_language_model/main.py", kind="LSTM language model, manual SGD, clip_grad_norm_",
        args=["--epochs", "2", "--emsize", "16", "--nhid", "16", "--bptt", "8", "--batch_size", "4",
              "--dropout", "0", "--log-interval", "4", "--save", "model.pt"],
        accel_args=["--accel"], data=[("wikitext", "data/wikitext-2", {})]),
    "ex_word_language_model_transformer": Script(
        "main.py", EX + "word_language_model/main.py", folder="ex_word_language_model",
        kind="Transformer encoder language model",
        args=["--model", "Transformer", "--epochs", "2", "--emsize", "16", "--nhid", "16", "--nhead", "2",
              "--bptt", "8", "--batch_size", "4", "--dropout", "0", "--lr", "2", "--log-interval", "4",
              "--save", "model.pt"],
        accel_args=["--accel"], data=[("wikitext", "data/wikitext-2", {})], compare="trend",
        note="its --dropout reaches the positional encoding only: nn.Transformer's own dropout (0.1) drops "
             "attention weights inside the attention kernel, from each library's own generator (nn.Dropout's "
             "masks are shared); with that dropout at 0 its 15 losses match torch's"),
    "ex_dcgan": Script(
        "main.py", EX + "dcgan/main.py", kind="DCGAN, ConvTranspose2d, BatchNorm2d, BCELoss",
        args=["--dataset", "folder", "--dataroot", "images", "--workers", "0", "--batchSize", "4", "--niter", "1",
              "--ngf", "4", "--ndf", "4", "--nz", "8", "--manualSeed", "1", "--outf", "out"],
        accel_args=["--accel"], data=[("image_folder", "images", {"n": 8, "size": 72})],
        note="Resize(64) + CenterCrop(64) of 72-pixel PNGs"),
    "ex_vae": Script(
        "main.py", EX + "vae/main.py", kind="VAE, binary_cross_entropy, randn_like",
        args=["--epochs", "2", "--batch-size", "8", "--log-interval", "2"], cpu_args=["--no-accel"],
        data=[("mnist", "../data", {"train": 32, "test": 16})], mkdirs=["results"]),
    "ex_regression": Script(
        "main.py", EX + "regression/main.py", kind="polynomial regression, manual SGD, smooth_l1_loss",
        rtol=2e-2, loss_re=r"Loss: (\S+) after (\d+) batches",
        note="runs until its loss is below 1e-3: that loss and the number of batches it took are compared"),
    "ex_siamese_network": Script(
        "main.py", EX + "siamese_network/main.py", kind="siamese ResNet-18, BCELoss, Adadelta",
        args=["--epochs", "1", "--batch-size", "4", "--test-batch-size", "10", "--log-interval", "1"],
        cpu_args=["--no-accel"], data=[("mnist", "../data", {"train": 20, "test": 20})], max_backward=2,
        accel_changes_data=True,
        note="pairs need two images of every class (its sampler loops until it finds a second one); Adadelta at "
             "lr 1.0 turns float32 differences of 1e-7 in near-zero gradients into 1e-4 steps, so losses part from "
             "torch's by 0.4% at the third step: two are compared"),
    "ex_gcn": Script(
        "main.py", EX + "gcn/main.py", kind="graph convolution, sparse adjacency (torch.sparse)",
        args=["--epochs", "10", "--val-every", "1", "--hidden-dim", "8", "--dropout-p", "0"],
        cpu_args=["--no-accel"], data=[("cora", "cora_src", {"archive": "cora.tgz"})],
        urls={CORA_URL: "cora.tgz"}, note="downloads Cora with requests: the stand-in serves a small graph"),
    "ex_gat": Script(
        "main.py", EX + "gat/main.py", kind="graph attention network",
        args=["--epochs", "10", "--val-every", "1", "--hidden-dim", "8", "--num-heads", "2", "--dropout-p", "0"],
        cpu_args=["--no-accel"], data=[("cora", "cora", {})]),
    "ex_super_resolution": Script(
        "main.py", EX + "super_resolution/main.py", kind="sub-pixel CNN (PixelShuffle), YCbCr PIL pipeline",
        args=["--upscale_factor", "3", "--batchSize", "2", "--testBatchSize", "1", "--nEpochs", "2",
              "--threads", "0"], accel_args=["--accel"], data=[("bsds300", "dataset", {"size": 96})],
        note="the 256-pixel crop is cut from 96-pixel images (CenterCrop pads), which keeps a step cheap"),
    "ex_mnist_hogwild": Script(
        "main.py", EX + "mnist_hogwild/main.py", kind="Hogwild training, torch.multiprocessing",
        args=["--epochs", "1", "--num-processes", "2", "--batch-size", "16", "--test-batch-size", "24",
              "--log-interval", "1"], data=MNIST_UP, compare="runs", timeout=240,
        note="two processes update shared weights: their interleaving is not reproducible"),
    "ex_time_sequence_prediction": Script(
        "train.py", EX + "time_sequence_prediction/train.py", kind="LSTMCell sine waves, LBFGS closure, float64",
        args=["--steps", "2"], prepare=[("generate_sine_wave.py", {"L": 60, "N": 8})],
        env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}, loss_re=r"loss: ([-+]?\d+\.\d+(?:e[-+]?\d+)?)",
        note="its readme runs generate_sine_wave.py first (here 8 waves of 60 steps, not 100 of 1000); that script "
             "torch.save()s a NumPy array, which torch.load reads only with weights_only=False since PyTorch 2.6: "
             "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 restores the default the example was written for"),
    "ex_reinforce": Script(
        "reinforce.py", EX + "reinforcement_learning/reinforce.py",
        kind="REINFORCE policy gradient: Categorical, Dropout, CartPole (gymnasium stand-in)",
        args=["--log-interval", "1"], max_backward=8, loss_re=r"Last reward: ([\d.]+)\tAverage reward: ([\d.]+)",
        note="prints rewards, not losses: an episode lasts until the pole falls, so its reward (its length) follows "
             "every sampled action; 8 episodes, one backward each"),
    "ex_actor_critic": Script(
        "actor_critic.py", EX + "reinforcement_learning/actor_critic.py",
        kind="actor-critic: Categorical, smooth_l1_loss value head, CartPole (gymnasium stand-in)",
        args=["--log-interval", "1"], max_backward=8, loss_re=r"Last reward: ([\d.]+)\tAverage reward: ([\d.]+)",
        note="prints rewards, not losses (see ex_reinforce); 8 episodes"),
    # ---------------------------------------------------------------------------------- kuangliu/pytorch-cifar
    # each model file's test() builds its model and runs a random batch through it, printing what the notes say
    # (its own call left commented out in most files: `then` calls it); models/shufflenet.py is left out, as its
    # float channel counts (out_planes/4) fail under Python 3 in torch too
    "kc_main": Script(
        "main.py", KC + "main.py", folder="kc", terminal=True,
        kind="SimpleDLA on CIFAR-10: SGD with momentum and weight decay, CosineAnnealingLR, RandomCrop with padding, "
             "DataLoader workers, checkpoint saved on the best accuracy",
        calls={"DataLoader": {"batch_size": 8}, "range(start_epoch, start_epoch + 200)": {1: 2}},
        data=[("cifar10", "data", {"train": 32, "test": 16})], compare="runs",
        note="2 of its 200 epochs, of 32 training images in batches of 8 (its 128) and 16 test images; its progress "
             "bar reads the terminal's size through `stty size`. Finite losses only: the random crops its DataLoader "
             "workers make are not drawn from the shared source, and at lr 0.1 on 4 batches the test loss (batch "
             "norm's running statistics) runs to 1e7 in torch too"),
    "kc_densenet": Script(
        "models/densenet.py", KC + "models/densenet.py", folder="kc", compare="output", then="test",
        kind="DenseNet (densenet_cifar): dense blocks concatenating features, AvgPool2d transitions", note="logits"),
    "kc_dla": Script(
        "models/dla.py", KC + "models/dla.py", folder="kc", compare="output",
        kind="DLA: deep layer aggregation trees", note="model and output size"),
    "kc_dla_simple": Script(
        "models/dla_simple.py", KC + "models/dla_simple.py", folder="kc", compare="output",
        kind="SimpleDLA", note="model and output size"),
    "kc_dpn": Script(
        "models/dpn.py", KC + "models/dpn.py", folder="kc", compare="output", then="test", atol=2e-4,
        kind="DPN92: dual-path blocks (grouped convs, residual and dense paths sliced and concatenated)",
        note="logits: batch norm over one image's 4 x 4 final maps moves those near 0 by 1e-4 from torch's"),
    "kc_efficientnet": Script(
        "models/efficientnet.py", KC + "models/efficientnet.py", folder="kc", compare="output",
        kind="EfficientNet-B0: depthwise convs, squeeze-excitation, swish, drop connect", note="output shape"),
    "kc_googlenet": Script(
        "models/googlenet.py", KC + "models/googlenet.py", folder="kc", compare="output", then="test",
        kind="GoogLeNet: inception branches concatenated, MaxPool2d with padding", note="output size"),
    "kc_mobilenet": Script(
        "models/mobilenet.py", KC + "models/mobilenet.py", folder="kc", compare="output", then="test",
        kind="MobileNet: depthwise separable convs (groups=in_planes)", note="output size"),
    "kc_mobilenetv2": Script(
        "models/mobilenetv2.py", KC + "models/mobilenetv2.py", folder="kc", compare="output", then="test",
        kind="MobileNetV2: inverted residuals, linear bottlenecks, shortcut convs", note="output size"),
    "kc_pnasnet": Script(
        "models/pnasnet.py", KC + "models/pnasnet.py", folder="kc", compare="output", then="test",
        kind="PNASNet-B: separable convs in a searched cell, a max-pooling branch", note="logits"),
    "kc_preact_resnet": Script(
        "models/preact_resnet.py", KC + "models/preact_resnet.py", folder="kc", compare="output", then="test",
        kind="PreActResNet-18: pre-activation residual blocks", note="output size"),
    "kc_regnet": Script(
        "models/regnet.py", KC + "models/regnet.py", folder="kc", compare="output",
        kind="RegNetX-200MF: grouped bottlenecks, squeeze-excitation", note="model and output shape"),
    "kc_resnet": Script(
        "models/resnet.py", KC + "models/resnet.py", folder="kc", compare="output", then="test",
        kind="ResNet-18 for CIFAR", note="output size"),
    "kc_resnext": Script(
        "models/resnext.py", KC + "models/resnext.py", folder="kc", compare="output", then="test_resnext",
        kind="ResNeXt29 (2x64d): grouped 3x3 convs (cardinality)", note="output size"),
    "kc_senet": Script(
        "models/senet.py", KC + "models/senet.py", folder="kc", compare="output", then="test",
        kind="SENet-18: squeeze-excitation gates by avg_pool2d and sigmoid", note="output size"),
    "kc_shufflenetv2": Script(
        "models/shufflenetv2.py", KC + "models/shufflenetv2.py", folder="kc", compare="output", then="test",
        kind="ShuffleNetV2 (0.5x): channel split, shuffle by view/permute, concatenation", note="output shape"),
    "kc_vgg": Script(
        "models/vgg.py", KC + "models/vgg.py", folder="kc", compare="output", then="test",
        kind="VGG-11 from a layer table", note="output size"),
    # ------------------------------------------------------------------------------------ hunkim/PyTorchZeroToAll
    "hk_auto_gradient": Script(
        "03_auto_gradient.py", HK + "03_auto_gradient.py", compare="output",
        kind="a weight as a requires_grad tensor, its gradient printed and stepped by hand, grad.data.zero_()",
        note="every printed gradient and loss is read as torch's"),
    "hk_linear_regression": Script(
        "05_linear_regression.py", HK + "05_linear_regression.py", compare="output",
        kind="linear regression: nn.Linear, MSELoss(reduction='sum'), SGD, 500 epochs, .data[0][0]",
        note="every printed loss (500) and the prediction are read as torch's"),
    "hk_logistic_regression": Script(
        "06_logistic_regression.py", HK + "06_logistic_regression.py", compare="output",
        kind="logistic regression: from torch import sigmoid, BCELoss, 1000 epochs",
        note="every printed loss and prediction is read as torch's"),
    "hk_softmax_loss": Script(
        "09_01_softmax_loss.py", HK + "09_01_softmax_loss.py", compare="output",
        kind="cross-entropy by NumPy and by nn.CrossEntropyLoss, batch losses, torch.max as a name imported",
        note="every printed loss and argmax is read as torch's"),
    "hk_softmax_mnist": Script(
        "09_2_softmax_mnist.py", HK + "09_2_softmax_mnist.py", overrides={"batch_size": 8},
        calls={"range(1, 10)": {1: 3}}, data=[("mnist", "mnist_data", {"train": 88, "test": 24})],
        ignore_re=r" time: ", kind="five-layer MLP on MNIST, SGD momentum, sum-reduced test loss",
        note="2 of its 9 epochs, 88 images in batches of 8 (its 64): it prints every 10 batches; timings are left "
             "out"),
    "hk_cnn_mnist": Script(
        "10_1_cnn_mnist.py", HK + "10_1_cnn_mnist.py", overrides={"batch_size": 8}, calls={"range(1, 10)": {1: 3}},
        data=[("mnist", "data", {"train": 88, "test": 24})],
        kind="CNN on MNIST: Variable(volatile=True), nll_loss(size_average=False), log_softmax",
        note="2 of its 9 epochs, 88 images in batches of 8 (its 64): it prints every 10 batches"),
    "hk_rnn_basics": Script(
        "12_1_rnn_basics.py", HK + "12_1_rnn_basics.py", compare="output",
        kind="nn.RNN shapes: one step, a sequence, a batch, batch_first, hidden state passed along",
        note="every printed size and tensor is read as torch's"),
    "hk_hello_rnn": Script(
        "12_2_hello_rnn.py", HK + "12_2_hello_rnn.py", compare="output",
        kind="nn.RNNCell-style model learning 'hihell' -> 'ihello' one character at a time, loss summed by +=",
        note="100 epochs: every predicted string and loss is read as torch's"),
    "hk_hello_rnn_emb": Script(
        "12_4_hello_rnn_emb.py", HK + "12_4_hello_rnn_emb.py", compare="output",
        kind="Embedding + RNN learning 'hihell' -> 'ihello', predicted strings",
        note="100 epochs: every predicted string and loss is read as torch's"),
    "hk_pack_pad": Script(
        "13_4_pack_pad.py", HK + "13_4_pack_pad.py", compare="output",
        kind="pack_padded_sequence / pad_packed_sequence through an LSTM: padding, sorting by length, embedding",
        note="every printed tensor, size and packed sequence is read as torch's"),
    # -------------------------------------------------------------------------------------- lucidrains/vit-pytorch
    "vitp_test_vit": Script(
        "test_vit.py", VITP + "tests/test_vit.py", folder="vitp", then="test_vit", compare="runs", loss_re=None,
        kind="ViT (vit_pytorch, its package __init__ importing ViT, SimpleViT, MAE, Dino): einops rearrange/repeat, "
             "Rearrange in nn.Sequential, cls token, dropout; the einops package itself, installed",
        note="the repository's own test: a 256-pixel image through a 6-layer, 1024-wide ViT, whose logits' shape it "
             "asserts; completing is the verdict"),
    # torch.fx (pytorch/examples fx/): tracing and graph rewriting; custom_tracer.py needs the tabulate package and
    # native_interpreter/ a C++ build, so they are left out
    "ex_fx_inline_function": Script(
        "inline_function.py", EX + "fx/inline_function.py", folder="ex_fx", compare="runs", loss_re=None,
        kind="symbolic_trace, then a Graph rewritten by inlining a submodule's call (Proxy, map_arg)",
        note="prints nothing: that it completes is the verdict"),
    "ex_fx_invert": Script(
        "invert.py", EX + "fx/invert.py", folder="ex_fx", compare="output",
        kind="an fx Graph inverted node by node (a table of inverse functions), GraphModule code printed and run",
        note="the generated code and the inverted result are read as torch's"),
    "ex_fx_module_tracer": Script(
        "module_tracer.py", EX + "fx/module_tracer.py", folder="ex_fx", compare="output",
        loss_re=r"Node layer(\d)_(\d)_",
        kind="a Tracer subclass recording each node's module qualified name (call_module) on resnet18",
        note="every node and its module, printed, is read as torch's (the numbers judged: its layers' indices)"),
    "ex_fx_primitive_library": Script(
        "primitive_library.py", EX + "fx/primitive_library.py", folder="ex_fx", compare="runs", loss_re=None,
        kind="torch.fx.wrap'ed primitives, a decomposition by Graph rewriting, traced.code",
        note="prints generated code that names torch.fx internals: that it completes is the verdict"),
    "ex_fx_profiling_tracer": Script(
        "profiling_tracer.py", EX + "fx/profiling_tracer.py", folder="ex_fx", compare="runs", loss_re=None,
        kind="a Tracer inserting torch.profiler record_function scopes around modules",
        note="prints profiler tables (timings): that it completes is the verdict"),
    "ex_fx_proxy_based_graph_creation": Script(
        "proxy_based_graph_creation.py", EX + "fx/proxy_based_graph_creation.py", folder="ex_fx",
        compare="runs", loss_re=None,
        kind="a Graph built by hand through Proxy objects, then GraphModule",
        note="prints nothing: that it completes is the verdict"),
    "ex_fx_replace_op": Script(
        "replace_op.py", EX + "fx/replace_op.py", folder="ex_fx", compare="runs", loss_re=None,
        kind="symbolic_trace, then every torch.add node's target replaced by torch.mul (operator and method forms)",
        note="prints nothing: that it completes is the verdict"),
    "ex_fx_subgraph_rewriter_basic_use": Script(
        "subgraph_rewriter_basic_use.py", EX + "fx/subgraph_rewriter_basic_use.py", folder="ex_fx",
        compare="runs", loss_re=None,
        kind="torch.fx.replace_pattern: a pattern subgraph rewritten to a replacement",
        note="prints nothing: that it completes is the verdict"),
    "ex_fx_wrap_output_dynamically": Script(
        "wrap_output_dynamically.py", EX + "fx/wrap_output_dynamically.py", folder="ex_fx",
        compare="runs", loss_re=None,
        kind="a traced module's output node wrapped by an activation chosen at run time, assert_close",
        note="checks itself with assert_close: that it completes is the verdict"),
    # ------------------------------------------------------------------------------------------------ karpathy
    "nanogpt": Script(
        "train.py", "https://github.com/karpathy/nanoGPT/blob/3adf61e154c3fe3fca428ad6bc3818b27a3b8291/train.py",
        kind="GPT (nanoGPT), AdamW, cosine LR, GradScaler, autocast context",
        args=["config/train_shakespeare_char.py", "--compile=False", "--dtype=float32",
              "--eval_iters=2", "--eval_interval=4", "--log_interval=1", "--block_size=16", "--batch_size=4",
              "--n_layer=2", "--n_head=2", "--n_embd=32", "--max_iters=8", "--lr_decay_iters=8",
              "--warmup_iters=2", "--dropout=0.0"], cpu_args=["--device=cpu"], accel_args=["--device=webgpu"],
        data=[("shakespeare_char", "data/shakespeare_char", {})]),
    "mingpt_adder": Script(
        "adder.py", MINGPT + "projects/adder/adder.py", kind="GPT (minGPT) learning to add, Trainer",
        args=["--data.ndigit=1", "--model.model_type=None", "--model.n_layer=2", "--model.n_head=2",
              "--model.n_embd=32", "--trainer.max_iters=20", "--trainer.batch_size=8", "--trainer.num_workers=0",
              "--trainer.device=cpu", "--system.work_dir=out"],
        note="one-digit sums: its evaluation at iteration 0 then generates 20 test answers instead of 500"),
    "mingpt_chargpt": Script(
        "chargpt.py", MINGPT + "projects/chargpt/chargpt.py", kind="character GPT (minGPT), Trainer",
        args=["--model.model_type=None", "--model.n_layer=2", "--model.n_head=2", "--model.n_embd=32",
              "--data.block_size=16", "--trainer.max_iters=20", "--trainer.batch_size=8",
              "--trainer.num_workers=0", "--trainer.device=cpu", "--system.work_dir=out"],
        data=[("chars", "input.txt", {})]),
    "makemore": Script(
        "makemore.py", "https://github.com/karpathy/makemore/blob/988aa59e4d8fefa526d06f3b453ad116258398d4/"
        "makemore.py", kind="character transformer (makemore), DataLoader with replacement sampler",
        args=["--type", "transformer", "--max-steps", "20", "--batch-size", "8", "--n-layer", "2", "--n-head", "2",
              "--n-embd", "16", "--n-embd2", "16", "--num-workers", "0", "--work-dir", "out"],
        data=[("names", "names.txt", {})], compare="trend",
        note="imports torch.utils.tensorboard: the real torch needs the tensorboard package for it"),
    "makemore_rnn": Script(
        "makemore.py", "https://github.com/karpathy/makemore/blob/988aa59e4d8fefa526d06f3b453ad116258398d4/"
        "makemore.py", folder="makemore", kind="character GRU (makemore)",
        args=["--type", "gru", "--max-steps", "41", "--batch-size", "8", "--n-embd", "16", "--n-embd2", "16",
              "--learning-rate", "1e-2", "--num-workers", "0", "--work-dir", "out"],
        data=[("names", "names.txt", {})], compare="trend",
        note="imports torch.utils.tensorboard: the real torch needs the tensorboard package for it; at its default "
             "rate (5e-4) 20 steps leave the GRU's loss where it was, in torch as here: 41 steps at 1e-2"),
    "ngvl_bigram": Script(
        "bigram.py", NGVL + "bigram.py", kind="bigram language model (Let's build GPT lecture)",
        overrides={"max_iters": 60, "eval_interval": 20, "eval_iters": 4}, data=[("chars", "input.txt", {})]),
    "ngvl_gpt": Script(
        "gpt.py", NGVL + "gpt.py", kind="GPT from scratch (Let's build GPT lecture)",
        overrides={"batch_size": 4, "block_size": 16, "max_iters": 10, "eval_interval": 5, "eval_iters": 2,
                   "n_embd": 32, "n_head": 2, "n_layer": 2, "dropout": 0.0},
        data=[("chars", "input.txt", {})], timeout=240,
        note="ends by sampling 500 characters with multinomial"),
    # ---------------------------------------------------------------------------------- yunjey/pytorch-tutorial
    "yj_linear_regression": Script(
        "main.py", YJ + "01-basics/linear_regression/main.py", kind="linear regression, from_numpy"),
    "yj_logistic_regression": Script(
        "main.py", YJ + "01-basics/logistic_regression/main.py", kind="softmax regression on MNIST",
        overrides={"num_epochs": 1, "batch_size": 1}, data=[("mnist", "../../data", {"train": 100, "test": 10})],
        note="prints every 100 steps: 100 images, batch 1"),
    "yj_feedforward": Script(
        "main.py", YJ + "01-basics/feedforward_neural_network/main.py", kind="MLP on MNIST",
        overrides={"num_epochs": 1, "batch_size": 1}, data=[("mnist", "../../data", {"train": 100, "test": 10})],
        note="prints every 100 steps: 100 images, batch 1"),
    "yj_cnn": Script(
        "main.py", YJ + "02-intermediate/convolutional_neural_network/main.py", kind="CNN with BatchNorm2d",
        overrides={"num_epochs": 1, "batch_size": 1}, data=[("mnist", "../../data", {"train": 100, "test": 10})],
        timeout=240, note="prints every 100 steps: 100 images, batch 1"),
    "yj_rnn": Script(
        "main.py", YJ + "02-intermediate/recurrent_neural_network/main.py", kind="LSTM on MNIST rows",
        overrides={"num_epochs": 1, "batch_size": 1, "hidden_size": 8, "num_layers": 1, "sequence_length": 7,
                   "input_size": 112},
        data=[("mnist", "../../data", {"train": 100, "test": 10})], timeout=240,
        note="prints every 100 steps: 100 images, batch 1; each image is read as 7 rows of 112 pixels by one "
             "small layer, which keeps 100 sequences cheap"),
    "yj_birnn": Script(
        "main.py", YJ + "02-intermediate/bidirectional_recurrent_neural_network/main.py",
        kind="bidirectional LSTM on MNIST rows",
        overrides={"num_epochs": 1, "batch_size": 1, "hidden_size": 8, "num_layers": 1, "sequence_length": 7,
                   "input_size": 112},
        data=[("mnist", "../../data", {"train": 100, "test": 10})], timeout=240,
        note="prints every 100 steps: 100 images, batch 1; each image is read as 7 rows of 112 pixels by one "
             "small layer, which keeps 100 sequences cheap"),
    "yj_resnet": Script(
        "main.py", YJ + "02-intermediate/deep_residual_network/main.py", kind="ResNet on CIFAR-10, lr decay",
        overrides={"num_epochs": 1, "batch_size": 1}, data=[("cifar10", "../../data", {"train": 100, "test": 10})],
        timeout=300, compare="runs",
        note="prints every 100 steps; with batch 1 through BatchNorm and Adam, float32 differences from torch grow "
             "tenfold every few steps (3e-6 at step 1, 1% by step 10), so its one loss is not compared"),
    "yj_language_model": Script(
        "main.py", YJ + "02-intermediate/language_model/main.py", kind="LSTM language model, clip_grad_norm_",
        overrides={"num_epochs": 1, "hidden_size": 32, "embed_size": 16, "num_samples": 20, "batch_size": 2,
                   "seq_length": 5},
        data=[("words", "data/train.txt", {"sentences": 120})], timeout=240,
        note="prints every 100 steps: 120 sentences make 2 x 550 tokens, 109 steps of 5"),
    "yj_gan": Script(
        "main.py", YJ + "03-advanced/generative_adversarial_network/main.py", kind="MLP GAN",
        overrides={"num_epochs": 1, "batch_size": 2, "hidden_size": 32},
        data=[("mnist", "../../data", {"train": 400, "test": 4})]),
    "yj_vae": Script(
        "main.py", YJ + "03-advanced/variational_autoencoder/main.py", kind="VAE",
        overrides={"num_epochs": 1, "batch_size": 4, "h_dim": 32},
        data=[("mnist", "../../data", {"train": 40, "test": 4})]),
    # -------------------------------------------------------------------------------- eriklindernoren/PyTorch-GAN
    "pg_gan": Script(
        "gan.py", PG + "gan/gan.py", kind="MLP GAN, Variable, FloatTensor",
        args=["--n_epochs", "1", "--batch_size", "8", "--latent_dim", "8", "--sample_interval", "1000"],
        data=[("mnist", "../../data/mnist", {"train": 24, "test": 4})]),
    "pg_wgan": Script(
        "wgan.py", PG + "wgan/wgan.py", kind="Wasserstein GAN, RMSprop, weight clipping",
        args=["--n_epochs", "1", "--batch_size", "4", "--latent_dim", "8", "--n_critic", "2",
              "--sample_interval", "1000"],
        data=[("mnist", "../../data/mnist", {"train": 24, "test": 4})]),
    "pg_cgan": Script(
        "cgan.py", PG + "cgan/cgan.py", kind="conditional GAN, Embedding, MSELoss, LongTensor",
        args=["--n_epochs", "1", "--batch_size", "8", "--latent_dim", "8", "--sample_interval", "1000"],
        data=[("mnist", "../../data/mnist", {"train": 24, "test": 4})]),
    # ---------------------------------------------------------------------------------- jcjohnson/pytorch-examples
    "jj_two_layer_net_tensor": Script(
        "two_layer_net_tensor.py", JJ + "tensor/two_layer_net_tensor.py", kind="manual forward and backward",
        loss_re=STEP_LOSS_RE, max_backward=None, note="500 steps of matmuls, no autograd"),
    "jj_two_layer_net_custom_function": Script(
        "two_layer_net_custom_function.py", JJ + "autograd/two_layer_net_custom_function.py",
        kind="custom autograd.Function", loss_re=STEP_LOSS_RE, max_backward=100),
    "jj_two_layer_net_optim": Script(
        "two_layer_net_optim.py", JJ + "nn/two_layer_net_optim.py", kind="nn.Sequential, Adam",
        loss_re=STEP_LOSS_RE, max_backward=100),
    "jj_dynamic_net": Script(
        "dynamic_net.py", JJ + "nn/dynamic_net.py", kind="dynamic graph (Python random depth), SGD momentum",
        loss_re=STEP_LOSS_RE, max_backward=40, rtol=5e-3,
        note="its loss jumps between 40 and 400 from step to step: float32 rounding differences grow past 1% "
             "after ~50 steps, so 40 are compared"),
    # ------------------------------------------------------------------------------------------ pytorch/tutorials
    "tut_quickstart": Script(
        "quickstart_tutorial.py", TUT + "07a339ece661a2b304b8834780470f522eed1e02/beginner_source/basics/"
        "quickstart_tutorial.py", kind="MLP on FashionMNIST, save/load state_dict",
        overrides={"epochs": 2}, data=[("fashion_mnist", "data", {"train": 128, "test": 64})]),
    "tut_polynomial_custom_function": Script(
        "polynomial_custom_function.py", TUT + "02ed6c5cf613bbf2b631704eee62033b8bd746ef/beginner_source/"
        "examples_autograd/polynomial_custom_function.py", kind="custom autograd.Function (Legendre P3)",
        loss_re=STEP_LOSS_RE, max_backward=600, note="prints every 100 steps"),
    "tut_sequence_models": Script(
        "sequence_models_tutorial.py", TUT + "0d1e0f7576479586ee777d5387153830750025eb/beginner_source/nlp/"
        "sequence_models_tutorial.py", kind="LSTM part-of-speech tagger, autograd.Variable, LongTensor",
        loss_re=r"(-?\d+\.\d{4})(?=[,\]])",
        note="prints no loss: every number of the printed tensors (LSTM outputs, tag log-probabilities before "
             "and after 600 training steps) is compared"),
    "tut_word_embeddings": Script(
        "word_embeddings_tutorial.py", TUT + "016d0cc077f60c82b8497d4c7f92051ce40cafee/beginner_source/nlp/"
        "word_embeddings_tutorial.py", kind="N-gram language model, Embedding",
        overrides={"EMBEDDING_DIM": 10}, loss_re=r"tensor\(\[\s*([-+]?\d+\.\d*(?:e[-+]?\d+)?)\]\)"),
    "tut_spatial_transformer": Script(
        "spatial_transformer_tutorial.py", TUT + "c53e7d4efc0e39e455c531d21ec7db28ba220214/intermediate_source/"
        "spatial_transformer_tutorial.py", kind="spatial transformer network: affine_grid, grid_sample, Dropout2d",
        data=[("mnist", ".", {"train": 64, "test": 64})], compare="trend", loss_re=r"\tLoss: (\d+\.\d+)",
        note="20 epochs of one batch of 64 (it prints every 500 batches, so batch 0 of each); Dropout2d draws from "
             "each library's own generator, so the losses must fall rather than match torch's"),
    "tut_seq2seq_translation": Script(
        "seq2seq_translation_tutorial.py", TUT + "803c1b1273a47bc53bb6cd5f63eecfb897bbc856/intermediate_source/"
        "seq2seq_translation_tutorial.py", kind="seq2seq: GRU encoder, attention decoder, teacher forcing, topk",
        overrides={"hidden_size": 32}, calls={"trainIters": {2: 150, "print_every": 15}},
        data=[("translation_pairs", "data/eng-fra.txt", {})], loss_re=r"\(\d+ \d+%\) (\d+\.\d+)", timeout=240,
        note="150 sentence pairs, one at a time (75000 in the tutorial), a loss averaged over every 15; it then "
             "translates the five French sentences it names, whose words the stand-in pairs hold"),
    "tut_char_rnn_classification": Script(
        "char_rnn_classification_tutorial.py", TUT + "10098032865151e891c6074522207880f0e68fd3/intermediate_source/"
        "char_rnn_classification_tutorial.py", kind="character RNN from Linear layers, manual SGD on p.data",
        overrides={"n_iters": 600, "print_every": 60, "plot_every": 60, "n_confusion": 60},
        data=[("language_names", "data/names", {})], compare="trend", loss_re=r"(?m)^\d+ \d+% \([^)]*\) (\d+\.\d+) ",
        note="its languages are the files glob.glob finds, in the directory's order, which differs between file "
             "systems: a recorded torch run would not stay comparable, so the losses must fall"),
    "tut_char_rnn_generation": Script(
        "char_rnn_generation_tutorial.py", TUT + "4ce8b871ef249dfacc1b389108842a0c2c0805b7/intermediate_source/"
        "char_rnn_generation_tutorial.py", kind="character RNN generating names, legacy add_(scalar, tensor)",
        overrides={"n_iters": 600, "print_every": 60, "plot_every": 60},
        data=[("language_names", "data/names", {})], compare="trend", loss_re=r"\(\d+ \d+%\) (\d+\.\d+)",
        note="glob.glob's order names its categories (see tut_char_rnn_classification): the losses must fall"),
    "tut_nn_tutorial": Script(
        "nn_tutorial.py", TUT + "764a8d6aed986f155098d91ea55a1f0c95b26dd8/beginner_source/nn_tutorial.py",
        kind="What is torch.nn really: hand-written model to Sequential, TensorDataset, WrappedDataLoader",
        data=[("mnist_pickle", "data/mnist/mnist.pkl.gz", {})],
        loss_re=r"(?m)tensor\(([-+]?\d+\.\d*(?:e[-+]?\d+)?)|^\d+ ([-+]?\d+\.\d+(?:e[-+]?\d+)?)$",
        note="every printed scalar tensor (losses, accuracies) and every epoch's validation loss is compared"),
    "tut_cifar10": Script(
        "cifar10_tutorial.py", TUT + "c53e7d4efc0e39e455c531d21ec7db28ba220214/beginner_source/blitz/"
        "cifar10_tutorial.py", kind="CIFAR-10 CNN (60-minute blitz), DataLoader workers, save/load state_dict",
        data=[("cifar10", "data", {"train": 8000, "test": 40})], timeout=420,
        loss_re=r"loss: (\d+\.\d+)|Accuracy for class: \w+ +is (\d+\.\d+)",
        note="prints a loss every 2000 batches of 4: 8000 images make one a pass; each class's test accuracy too"),
    "tut_knowledge_distillation": Script(
        "knowledge_distillation_tutorial.py", TUT + "c53e7d4efc0e39e455c531d21ec7db28ba220214/beginner_source/"
        "knowledge_distillation_tutorial.py",
        kind="knowledge distillation: soft targets at a temperature, CosineEmbeddingLoss, hint regressor with MSE",
        calls={name: {"epochs": 1} for name in ("train", "train_knowledge_distillation", "train_cosine_loss",
                                                 "train_mse_loss")},
        data=[("cifar10", "data", {"train": 32, "test": 20})], timeout=300,
        loss_re=r"Loss: ([-+]?\d+\.\d+(?:e[-+]?\d+)?)|Test Accuracy: (\d+\.\d+)%",
        note="five training runs of one epoch of 32 images (one batch of its 128) instead of ten over 50000; each "
             "run's loss and test accuracy are compared"),
    "tut_fgsm": Script(
        "fgsm_tutorial.py", TUT + "8bcd0ac63dff35599649fc78711b6c155717823f/beginner_source/fgsm_tutorial.py",
        kind="adversarial examples (FGSM): gradient of the loss in the input, sign, clamp; a loaded state_dict",
        data=[("mnist", "../data", {"train": 10, "test": 100}), ("lenet_checkpoint", "lenet_mnist_model.pth", {})],
        loss_re=r"Test Accuracy = (\d+) / \d+ = ([\d.]+)",
        note="the 'pretrained' LeNet is the stand-in's (random weights in torch.save's format): a fifth of the test "
             "images are classified right before the attack; each epsilon's count of images still right after it "
             "is compared"),
    "tut_per_sample_grads": Script(
        "per_sample_grads.py", TUT + "db77dcf6e3637924f43852c014f2af9978b0f891/intermediate_source/per_sample_grads.py",
        kind="per-sample gradients: autograd.grad per sample vs torch.func grad + vmap + functional_call, Timer",
        overrides={"device": "cpu"}, calls={"timeit": {0: 1}}, compare="runs",
        loss_re=r"Size\(\[(\d+), (\d+), (\d+), (\d+), (\d+)\]\)",
        note="the script checks itself (allclose of the looped and the vmapped gradients of 64 samples); its "
             "device = 'cuda' is set to 'cpu' and its two Timer.timeit(100) to one run each (after PyTorch's two "
             "warm-up runs); it prints a shape and timings, so only that it ran is judged"),
    "tut_parametrizations": Script(
        "parametrizations.py", TUT + "3d37bd7d070abfd7fa7b850be4cce22cb7c0315c/intermediate_source/parametrizations.py",
        kind="nn.utils.parametrize: symmetric, skew, Cayley and matrix_exp weights, right_inverse, cached, remove",
        loss_re=r"(-?\d+\.\d{4})(?=[,\]])|tensor\((-?\d+\.\d*(?:e[-+]\d+)?)[,)]",
        note="trains nothing: every printed matrix entry and distance is compared (the distances of an orthogonal "
             "or symmetric result from its constraint are float32 round-off, within atol)"),
    "tut_ensembling": Script(
        "ensembling.py", TUT + "5130967035247c8343376ee69f49d6e10d61eaca/intermediate_source/ensembling.py",
        kind="model ensembling: stack_module_state, vmap over models, functional_call on a 'meta' base model",
        overrides={"device": "cpu"}, compare="runs", loss_re=r"(?m)^\[(\d+), ",
        note="checks itself (allclose of the vmapped and the looped predictions of 10 MLPs); its device = 'cuda' is "
             "set to 'cpu'; it prints the models' count and timings, so only that it ran is judged"),
    "tut_what_is_state_dict": Script(
        "what_is_state_dict.py", TUT + RECIPES + "what_is_state_dict.py", compare="output",
        kind="a model's and an optimizer's state_dict, printed: parameter names and sizes, param_groups' defaults",
        note="prints the model, each state_dict entry's size and the optimizer's state and param_groups: read "
             "as torch's output"),
    "tut_general_checkpoint": Script(
        "saving_and_loading_a_general_checkpoint.py", TUT + RECIPES + "saving_and_loading_a_general_checkpoint.py",
        compare="output", kind="a checkpoint dict (model and SGD-momentum state_dicts, epoch, loss) saved and loaded",
        note="prints only the model: read as torch's; that saving, loading and load_state_dict complete is the rest"),
    "tut_saving_loading_for_inference": Script(
        "saving_and_loading_models_for_inference.py", TUT + RECIPES + "saving_and_loading_models_for_inference.py",
        compare="output", env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
        kind="a state_dict saved and loaded, then the entire model pickled by torch.save(net) and loaded back",
        note="prints the model: read as torch's; loading a whole pickled module needs weights_only=False since "
             "PyTorch 2.6, which TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 restores as the recipe was written for"),
    "tut_saving_multiple_models": Script(
        "saving_multiple_models_in_one_file.py", TUT + RECIPES + "saving_multiple_models_in_one_file.py",
        compare="runs", loss_re=None, kind="two models and their optimizers in one torch.save file, loaded back",
        note="prints nothing: that it completes is the verdict"),
    "tut_warmstarting": Script(
        "warmstarting_model_using_parameters_from_a_different_model.py",
        TUT + RECIPES + "warmstarting_model_using_parameters_from_a_different_model.py", compare="runs",
        loss_re=None, kind="load_state_dict(strict=False) across two model classes",
        note="prints nothing: that it completes is the verdict"),
    "tut_defining_a_neural_network": Script(
        "defining_a_neural_network.py", TUT + RECIPES + "defining_a_neural_network.py", compare="output",
        ignore_re=r"-\d+\.\d{4}", kind="a CNN with Dropout2d defined, printed and run on one random image",
        note="Dropout2d (in training mode) draws from each library's own generator, so the printed log-"
             "probabilities are left out; the model's printed structure is read as torch's"),
    "tut_reasoning_about_shapes": Script(
        "reasoning_about_shapes.py", TUT + "c53e7d4efc0e39e455c531d21ec7db28ba220214/recipes_source/recipes/"
        "reasoning_about_shapes.py", compare="output", shared_random=False, ignore_re=r"^Time taken",
        kind="the meta device: conv shapes of a 2**48-element input, forward hooks printing each layer's shape",
        note="its torch.rand on the meta device makes 2**10 x 3 x 2**16 x 2**16 elements, which the shared NumPy "
             "source would have to fill: each library draws its own (the meta device holds no values anyway); "
             "timings are left out"),
    "tut_blitz_autograd": Script(
        "autograd_tutorial.py", TUT + "05f04cb4463d507cc90f891db82d8c2685e14b53/beginner_source/blitz/"
        "autograd_tutorial.py", compare="output",
        kind="autograd basics (60-minute blitz): grad_fn, requires_grad_, backward with a gradient, no_grad",
        note="every printed tensor, flag and grad_fn name is read as torch's"),
    "tut_blitz_neural_networks": Script(
        "neural_networks_tutorial.py", TUT + "06dc97785c47755b8d5bca167ad3cfc2ee8a04c1/beginner_source/blitz/"
        "neural_networks_tutorial.py", compare="output",
        kind="LeNet (60-minute blitz): parameters, backward of a random gradient, MSELoss, next_functions, SGD",
        ignore_re=r"^<(AccumulateGrad|ReluBackward0) object",
        note="every printed tensor, size and grad_fn name is read as torch's but one: the first input of the "
             "linear layer's node is the bias's AccumulateGrad in torch (addmm(bias, x, w.t())), the ReLU's "
             "(which its comment expects) in webgrad, whose node takes (x, w, b)"),
    "tut_jacobians_hessians": Script(
        "jacobians_hessians.py", TUT + "14f19bbffcff42ee752897e57b4b96e4972d302f/intermediate_source/"
        "jacobians_hessians.py", compare="output", calls={"timeit": {0: 1}},
        overrides={"Din": 8, "Dout": 12, "batch_size": 4},
        ignore_re=r"Measurement object|^\s+[\d.]+ [mun]?s$|measurement, |^(compute_jac|jac(fwd|rev))\(|delta:",
        kind="torch.func: jacrev, jacfwd, hessian, vmap of vjp, batched Jacobians and Hessians, hvp by jvp of grad",
        note="checks itself (allclose of each Jacobian, Hessian and hvp against another way of computing it); its "
             "six Timer.timeit(500) run once each and their printed timings are left out; the first Jacobian row "
             "and every shape printed are read as torch's. Its layers (Din x Dout: 32 x 2048, 2048 x 32, 512 x 32, "
             "31 x 33, a batch of 64) are all 8 x 12, a batch of 4: webgrad's jacfwd and jacrev take one backward "
             "pass per output element (torch's one batched pass), so its 32 x 512 x 512 Hessians took minutes"),
    "tut_neural_tangent_kernels": Script(
        "neural_tangent_kernels.py", TUT + "34272e8d6470967947c5798e1ef5b0e4710cc80b/intermediate_source/"
        "neural_tangent_kernels.py", compare="output", overrides={"device": "cpu"}, calls={"randn": {0: 3}},
        kind="neural tangent kernels: vmap of jacrev over functional_call, einsum contractions, vmap of vjp and jvp",
        note="its device = 'cuda' is set to 'cpu' and its 20 train and 5 test images to 3 each; checks itself "
             "(allclose of the Jacobian-contraction and the NTK-vector-product kernels); the shapes it prints are "
             "read as torch's"),
    "tut_custom_function_double_backward": Script(
        "custom_function_double_backward_tutorial.py", TUT + "0ece40a1f1c8b0adb2c03fe2cb480762b96c09ee/"
        "intermediate_source/custom_function_double_backward_tutorial.py", compare="runs", loss_re=None,
        kind="double backward through custom autograd.Functions: gradcheck, gradgradcheck, create_graph",
        note="prints nothing: gradcheck and gradgradcheck raise where a first or second derivative is wrong, so "
             "completing is the verdict; torchviz is the stand-in's, which walks each graph it is given"),
    "tut_module_load_state_dict_tips": Script(
        "module_load_state_dict_tips.py", TUT + "06059c5ed41b731d4d3392d18d417fd267246e05/recipes_source/recipes/"
        "module_load_state_dict_tips.py", compare="runs", loss_re=None,
        kind="loading a checkpoint: torch.load(mmap=True), a module built under torch.device('meta'), "
             "load_state_dict(assign=True)",
        note="prints nothing: that it completes is the verdict"),
    "tut_autogradqs": Script(
        "autogradqs_tutorial.py", TUT + "1532c0de875b79f541371438d8d1d08be18f87de/beginner_source/basics/"
        "autogradqs_tutorial.py", compare="output",
        kind="autograd basics (Learn the Basics): grad_fn names, no_grad, detach, accumulated vector-Jacobian "
             "products",
        note="every printed gradient, flag and grad_fn name is read as torch's"),
    "tut_forward_ad_usage": Script(
        "forward_ad_usage.py", TUT + "2d52ead6fdcf053698694bfe1c11cd88758f6f11/intermediate_source/"
        "forward_ad_usage.py", compare="runs", loss_re=None,
        kind="forward-mode AD: dual tensors, dual parameters in a Module and functional_call, a custom Function's "
             "jvp, gradcheck(check_forward_ad=True), functorch.jvp and make_functional_with_buffers",
        note="prints nothing: it checks itself (the dual tangents' identities, allclose of two JVPs, gradcheck), "
             "so completing is the verdict"),
    "tut_buildmodel": Script(
        "buildmodel_tutorial.py", TUT + "07a339ece661a2b304b8834780470f522eed1e02/beginner_source/basics/"
        "buildmodel_tutorial.py", compare="output",
        kind="Build the Neural Network (Learn the Basics): Flatten, Sequential, Softmax, argmax, named_parameters",
        note="every printed tensor (its grad_fn too), size and module is read as torch's"),
    "tut_tensorqs": Script(
        "tensorqs_tutorial.py", TUT + "0dea8a155bb46fd384abe428afcbb65e0a391739/beginner_source/basics/"
        "tensorqs_tutorial.py", compare="output",
        kind="Tensors (Learn the Basics): creation, attributes, indexing assignment, cat, out=, item, in-place, "
             "memory shared with NumPy both ways",
        note="every printed tensor and array is read as torch's (t.numpy() and torch.from_numpy share memory: "
             "an in-place change on either side shows on the other)"),
    "tut_swap_tensors": Script(
        "swap_tensors.py", TUT + "102956ffb0b138738a60a163c979f8a7f7f9c8ff/recipes_source/recipes/swap_tensors.py",
        compare="runs", loss_re=None,
        kind="torch.utils.swap_tensors, a __torch_dispatch__ wrapper subclass, "
             "__future__.set_swap_module_params_on_conversion, Tensor.module_load",
        note="prints ids, which differ from run to run: that it completes is the verdict"),
    "tut_custom_function_conv_bn": Script(
        "custom_function_conv_bn_tutorial.py", TUT + "00e250bb5194997fb2c89f073c58d5e8c4cd1d2b/intermediate_source/"
        "custom_function_conv_bn_tutorial.py", compare="runs", data=MNIST_UP,
        kind="conv + batch norm fused in a custom Function (once_differentiable, backward recomputing the conv), "
             "gradcheck, inference_mode, Adadelta, StepLR",
        note="gradcheck checks each Function's backward; then a fused and an unfused net train two epochs of one "
             "batch (48 images, its batch is 2048): finite losses. The real torch cannot run it on a CPU-only build "
             "(torch.cuda.reset_peak_memory_stats raises there), so nothing is compared"),
    # ------------------------------------------------------------------------------------ MorvanZhou/PyTorch-Tutorial
    "mz_rnn_classifier": Script(
        "402_RNN_classifier.py", MZ + "402_RNN_classifier.py", kind="LSTM classifier, legacy MNIST attributes",
        overrides={"BATCH_SIZE": 1}, data=[("mnist", "mnist", {"train": 51, "test": 20})], timeout=240,
        loss_re=r"train loss: ([-+]?\d+\.\d+)", rtol=1e-2,
        note="prints every 50 steps; Adam at lr 0.01 through an LSTM drifts 0.3% from torch in float32 by then"),
    "mz_autoencoder": Script(
        "404_autoencoder.py", MZ + "404_autoencoder.py", kind="MLP autoencoder",
        overrides={"EPOCH": 1, "BATCH_SIZE": 2}, data=[("mnist", "mnist", {"train": 202, "test": 4})],
        note="prints every 100 steps"),
    "mz_variable": Script(
        "202_variable.py", MZ + "202_variable.py", compare="output",
        kind="autograd.Variable(requires_grad=True), backward of a mean, .grad, .data, .data.numpy()",
        note="every printed tensor is read as torch's"),
    "mz_activation": Script(
        "203_activation.py", MZ + "203_activation.py", compare="runs", loss_re=None,
        kind="relu, sigmoid, tanh, softplus of a linspace, Variable, plotted (stand-in matplotlib)",
        note="prints nothing: that it completes is the verdict"),
    "mz_regression": Script(
        "301_regression.py", MZ + "301_regression.py", compare="output",
        kind="MLP regression of a noisy parabola (unsqueeze of a linspace, pow, rand), 200 steps, interactive plot",
        note="prints the net (its losses are drawn on the plot, which the stand-in does not draw): read as torch's"),
    "mz_classification": Script(
        "302_classification.py", MZ + "302_classification.py", compare="output",
        kind="two-cluster classification: torch.normal of a tensor mean, cat, max(F.softmax(out), 1), accuracy",
        note="prints the net: read as torch's"),
    "mz_build_nn_quickly": Script(
        "303_build_nn_quickly.py", MZ + "303_build_nn_quickly.py", compare="output",
        kind="a Module subclass and the same net as nn.Sequential, printed",
        note="both printed nets are read as torch's"),
    "mz_save_reload": Script(
        "304_save_reload.py", MZ + "304_save_reload.py", compare="runs", loss_re=None,
        env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
        kind="a whole net pickled by torch.save(net) and loaded, and its state_dict loaded into a new net",
        note="prints nothing (it plots the three nets' predictions): that it completes is the verdict; loading a "
             "pickled net needs weights_only=False since PyTorch 2.6"),
    "mz_batch_train": Script(
        "305_batch_train.py", MZ + "305_batch_train.py", compare="output",
        kind="TensorDataset and DataLoader(shuffle=True) over linspaces, each batch printed as NumPy",
        note="every printed batch is read as torch's"),
    "mz_optimizer": Script(
        "306_optimizer.py", MZ + "306_optimizer.py", compare="output", overrides={"EPOCH": 2},
        kind="SGD, momentum, RMSprop and Adam training four copies of a net, losses kept per optimizer",
        note="2 of its 12 epochs; it prints the epochs only (its losses are plotted)"),
    "mz_cnn": Script(
        "401_CNN.py", MZ + "401_CNN.py", overrides={"BATCH_SIZE": 8}, data=[("mnist", "mnist", {"train": 56,
                                                                                                 "test": 40})],
        kind="CNN on MNIST: legacy train_data/test_data attributes, type(torch.FloatTensor), argmax by max",
        loss_re=r"train loss: (\d+\.\d+) \| test accuracy: (\d+\.\d+)",
        note="56 images in batches of 8 (its 50): it prints every 50 steps, so step 0; then its 10 predictions"),
    "mz_rnn_regressor": Script(
        "403_RNN_regressor.py", MZ + "403_RNN_regressor.py", compare="output",
        kind="nn.RNN mapping sin to cos, hidden state carried (h_state.data), a Linear per time step, stack",
        note="prints the RNN: read as torch's (its losses are plotted)"),
    "mz_gan": Script(
        "406_GAN.py", MZ + "406_GAN.py", compare="runs", loss_re=None, calls={"range(10000)": {0: 200}},
        kind="GAN drawing curves: D and G losses by log, backward(retain_graph=True), two Adams",
        note="prints nothing (its scores are drawn on the plot): 200 of its 10000 steps complete"),
    "mz_why_torch_dynamic_graph": Script(
        "501_why_torch_dynamic_graph.py", MZ + "501_why_torch_dynamic_graph.py", compare="output",
        kind="an RNN fed sequences whose length np.random.randint picks each step (a dynamic graph)",
        note="prints the RNN and each step's sequence length: read as torch's"),
    "mz_dropout": Script(
        "503_dropout.py", MZ + "503_dropout.py", compare="output",
        kind="an overfitting net and one with Dropout(0.5), train() and eval() switched to test",
        note="prints both nets: read as torch's (its losses are plotted)"),
    "mz_batch_normalization": Script(
        "504_batch_normalization.py", MZ + "504_batch_normalization.py", compare="output", overrides={"EPOCH": 2},
        kind="BatchNorm1d(momentum=0.5) after every layer built with setattr, init.normal_/constant_, tanh",
        note="2 of its 12 epochs over 2000 samples: it prints the epochs (its losses are plotted)"),
    # ------------------------------------------------------------------------------------------ graykode/nlp-tutorial
    "nlp_nnlm": Script(
        "NNLM.py", NLP + "1-1.NNLM/NNLM.py", compare="output", calls={"range(5000)": {0: 1000}},
        kind="neural probabilistic language model: Embedding, nn.Parameter bias, tanh, Adam; predicted words",
        note="prints every 1000 of its 5000 steps: 1000 are run, then its predicted words are read as torch's"),
    "nlp_word2vec": Script(
        "Word2Vec-Skipgram(Softmax).py", NLP + "1-2.Word2Vec/Word2Vec-Skipgram(Softmax).py", compare="output",
        calls={"range(5000)": {0: 2000}},
        kind="skip-gram word2vec on one-hot rows (np.random.choice batches), scatter plot",
        note="prints every 1000 of its 5000 steps: 2000 are run"),
    "nlp_textcnn": Script(
        "TextCNN.py", NLP + "2-1.TextCNN/TextCNN.py", compare="output", calls={"range(5000)": {0: 1000}},
        kind="TextCNN sentence classifier: Conv2d over embeddings, MaxPool2d, permute, cat",
        note="prints every 1000 of its 5000 steps: 1000 are run, then its predictions are read as torch's"),
    "nlp_textrnn": Script(
        "TextRNN.py", NLP + "3-1.TextRNN/TextRNN.py", compare="output", calls={"range(5000)": {0: 1000}},
        kind="nn.RNN next-word model on one-hot inputs (torch.FloatTensor of a list of arrays)",
        note="prints every 1000 of its 5000 steps: 1000 are run, then its predictions are read as torch's"),
    "nlp_textlstm": Script(
        "TextLSTM.py", NLP + "3-2.TextLSTM/TextLSTM.py", compare="output", calls={"range(1000)": {0: 300}},
        kind="character LSTM completing words",
        note="prints every 100 of its 1000 steps: 300 are run"),
    "nlp_seq2seq": Script(
        "Seq2Seq.py", NLP + "4-1.Seq2Seq/Seq2Seq.py", compare="output", calls={"range(5000)": {0: 1000}},
        kind="RNN encoder-decoder (nn.RNN with dropout on one layer), word translation by argmax",
        note="prints every 1000 of its 5000 steps: 1000 are run, then its translations are read as torch's"),
    "nlp_seq2seq_attention": Script(
        "Seq2Seq(Attention).py", NLP + "4-2.Seq2Seq(Attention)/Seq2Seq(Attention).py", compare="output",
        calls={"range(2000)": {0: 400}}, kind="RNN encoder-decoder with attention computed step by step, matshow",
        note="prints every 400 of its 2000 steps: 400 are run (each scores the attention one dot product at a "
             "time, written into a tensor by index), then its translation is read as torch's"),
    "nlp_bilstm_attention": Script(
        "Bi-LSTM(Attention).py", NLP + "4-3.Bi-LSTM(Attention)/Bi-LSTM(Attention).py", compare="output",
        calls={"range(5000)": {0: 1000}},
        kind="bidirectional LSTM with attention (bmm, softmax) classifying sentences",
        note="prints every 1000 of its 5000 steps: 1000 are run, then its verdict on a test sentence is read as "
             "torch's"),
    "nlp_transformer": Script(
        "Transformer.py", NLP + "5-1.Transformer/Transformer.py", compare="output",
        overrides={"d_model": 32, "d_ff": 64, "n_layers": 2, "n_heads": 2}, calls={"range(20)": {0: 10}},
        kind="Transformer from scratch (Attention Is All You Need): sinusoid table, masks, Conv1d feed-forward",
        note="its 6 layers of width 512 are 2 of width 32 with 2 heads, and 10 of its 20 steps are run"),
    "nlp_transformer_greedy": Script(
        "Transformer(Greedy_decoder).py", NLP + "5-1.Transformer/Transformer(Greedy_decoder).py",
        folder="nlp_transformer", compare="output",
        overrides={"d_model": 32, "d_ff": 64, "n_layers": 2, "n_heads": 2}, calls={"range(20)": {0: 10}},
        kind="Transformer from scratch decoding greedily, one index assignment a step",
        note="as nlp_transformer"),
    "nlp_bert": Script(
        "BERT.py", NLP + "5-2.BERT/BERT.py", compare="output",
        overrides={"d_model": 32, "d_ff": 64, "n_layers": 2, "n_heads": 2}, calls={"range(100)": {0: 30}},
        kind="BERT from scratch: masked LM and next-sentence heads, gather, gelu by erf, a Linear made in forward",
        note="its 6 layers of width 768 are 2 of width 32 with 2 heads, and 30 of its 100 steps are run; its "
             "batches come from Python's random, seeded alike under both libraries"),
    # ------------------------------------------------------------------------------------- rasbt/LLMs-from-scratch
    "llm_gpt": Script(
        "gpt.py", LLM + "ch04/01_main-chapter-code/gpt.py", compare="output",
        kind="GPT-2 124M built from scratch (LayerNorm, GELU, causal MultiHeadAttention), 10 tokens greedily "
             "generated; tiktoken (stand-in)",
        timeout=240,
        note="untrained: the generated token ids (argmax of the logits) are read as torch's; its 124M parameters "
             "make it the slowest of its kind (its sibling gpt_with_kv_cache.py, 200 tokens from the same model, "
             "took two minutes: the small GQA/MLA/SWA/MoE variants below cover KV caches)"),
    "llm_gpt_train": Script(
        "gpt_train.py", LLM + "ch05/01_main-chapter-code/gpt_train.py", compare="output",
        overrides={"GPT_CONFIG_124M": {"vocab_size": 50257, "context_length": 32, "emb_dim": 32, "n_heads": 2,
                                       "n_layers": 2, "drop_rate": 0.1, "qkv_bias": False},
                   "OTHER_SETTINGS": {"learning_rate": 5e-4, "num_epochs": 2, "batch_size": 2,
                                      "weight_decay": 0.1}},
        data=[("chars", "the-verdict.txt", {"sentences": 30})],
        kind="GPT pretraining from scratch: AdamW, sliding-window Dataset, eval loop, greedy samples, save/load",
        note="GPT-2 124M at context 256 is 2 layers of width 32 at context 32, for 2 of its 10 epochs; the story it "
             "downloads is stand-in text (read from the-verdict.txt as the script does when it is there); the losses "
             "and the token ids of each epoch's greedy sample are read as torch's"),
    "llm_kv_gqa": Script(
        "gpt_with_kv_gqa.py", LLM + "ch04/04_gqa/gpt_with_kv_gqa.py", compare="output",
        args=["--emb_dim", "64", "--n_heads", "4", "--n_layers", "2", "--n_kv_groups", "2", "--max_new_tokens", "20"],
        ignore_re=r"^Time: |tokens/sec$",
        kind="grouped-query attention GPT in bfloat16 (repeat_interleave of keys), KV-cache generation",
        note="untrained: the generated token ids are read as torch's; timings are left out"),
    "llm_kv_mla": Script(
        "gpt_with_kv_mla.py", LLM + "ch04/05_mla/gpt_with_kv_mla.py", compare="output",
        args=["--emb_dim", "64", "--n_heads", "4", "--n_layers", "2", "--max_new_tokens", "20"],
        ignore_re=r"^Time: |tokens/sec$",
        kind="multi-head latent attention GPT in bfloat16 (a cached low-rank latent), KV-cache generation",
        note="untrained: the generated token ids are read as torch's; timings are left out"),
    "llm_kv_swa": Script(
        "gpt_with_kv_swa.py", LLM + "ch04/06_swa/gpt_with_kv_swa.py", compare="output",
        args=["--emb_dim", "64", "--n_heads", "4", "--n_layers", "2", "--max_new_tokens", "20",
              "--sliding_window_size", "8"],
        ignore_re=r"^Time: |tokens/sec$",
        kind="sliding-window attention GPT in bfloat16, a windowed KV cache",
        note="untrained: the generated token ids are read as torch's; timings are left out"),
    "llm_kv_moe": Script(
        "gpt_with_kv_moe.py", LLM + "ch04/07_moe/gpt_with_kv_moe.py", compare="output",
        args=["--emb_dim", "64", "--hidden_dim", "128", "--n_heads", "4", "--n_layers", "2", "--max_new_tokens",
              "20", "--num_experts", "4", "--num_experts_per_tok", "2"],
        ignore_re=r"^Time: |tokens/sec$|^Avg MoE FF time/call",
        kind="mixture-of-experts GPT in bfloat16 (topk gate, softmax, experts gathered by mask), KV cache",
        note="untrained: the generated token ids are read as torch's; timings (its MoE layers' too) are left out"),
    # ------------------------------------------------------------------- aladdinpersson/Machine-Learning-Collection
    "ap_lenet5": Script(
        "lenet5_pytorch.py", AP + "65b8c8049560b19ace11ef754cb4dbe5aa415296/ML/Pytorch/CNN_architectures/"
        "lenet5_pytorch.py", compare="output", loss_re=r"\[(\d+), (\d+)\]",
        kind="LeNet-5 defined (AvgPool2d, a 5x5 conv to 1x1) and run on a random batch",
        note="prints the output's shape only"),
    "ap_init_weights": Script(
        "pytorch_init_weights.py", AP + "28bd89ea9c07db15ebaa232328a53e03614b1c88/ML/Pytorch/Basics/"
        "pytorch_init_weights.py", compare="output",
        kind="nn.init.kaiming_uniform_ and constant_ over self.modules(), every Parameter printed",
        note="every printed parameter (Parameter containing: tensor(..., requires_grad=True)) is read as torch's"),
    "ap_tensorbasics": Script(
        "pytorch_tensorbasics.py", AP + "e6c7f42c46a6414f12b2d8820e00e4474be7bbd8/ML/Pytorch/Basics/"
        "pytorch_tensorbasics.py", compare="output",
        kind="tensor basics: creation, dtype conversions printed (bool, int16, float16), add(out=) of ints into "
             "floats, matrix_power, fancy and boolean indexing, where, unique, chunk, views",
        note="every printed tensor, shape and flag is read as torch's"),
    "ap_vgg": Script(
        "pytorch_vgg_implementation.py", AP + "28bd89ea9c07db15ebaa232328a53e03614b1c88/ML/Pytorch/"
        "CNN_architectures/pytorch_vgg_implementation.py", compare="output",
        kind="VGG-16 with BatchNorm built from a layer table (type(x) == int, nn.Sequential(*layers)), printed",
        note="prints the model (its forward on 224-pixel images is commented out): read as torch's"),
    "ap_transformer": Script(
        "transformer_from_scratch.py", AP + "71faea865041410473a8c0543aaf48b51c63e92f/ML/Pytorch/more_advanced/"
        "transformer_from_scratch/transformer_from_scratch.py", compare="output",
        kind="Transformer from scratch: einsum of an operand list, masked_fill(mask == 0, -1e20), tril masks "
             "expanded, a forward pass of the 6-layer, 512-wide model",
        note="prints its device and the output's shape"),
    "ap_rnn_gru_lstm": Script(
        "pytorch_rnn_gru_lstm.py", AP + "e6c7f42c46a6414f12b2d8820e00e4474be7bbd8/ML/Pytorch/Basics/"
        "pytorch_rnn_gru_lstm.py", compare="output",
        overrides={"hidden_size": 32, "batch_size": 16},
        data=[("mnist", "dataset", {"train": 48, "test": 24})],
        kind="two-layer LSTM over MNIST rows (batch_first), tqdm (stand-in), accuracy as a 0-d tensor formatted",
        note="its 3 epochs of 48 training images in batches of 16, with 32 hidden units (its 256 over 28 steps "
             "make a step slow): the two accuracies it prints are read as torch's"),
    "ap_vae": Script(
        "train.py", AP + "ae581a64e6b1a9350adbdc726bc5a860cb6f5370/ML/Pytorch/more_advanced/VAE/train.py",
        compare="runs", loss_re=None, overrides={"NUM_EPOCHS": 2},
        data=[("mnist", "dataset", {"train": 160, "test": 8})],
        kind="MLP VAE: BCELoss(reduction='sum'), KL term through log(sigma**2), tqdm loop (stand-in), digits sampled "
             "by the decoder and written with save_image",
        note="prints nothing (its tqdm bar shows the loss): that it trains and writes its 50 samples is the "
             "verdict; 160 images, so that one of each digit is found in order for its sampling"),
}


# ------------------------------------------------------------------------------------------------------ the parent

def default_root():
    """tests/compat of the source tree this package is in, or $WEBGRAD_CORPUS_ROOT."""
    env = os.environ.get("WEBGRAD_CORPUS_ROOT")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "tests", "compat"))


def _package_dir():
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def _load_corpus_data(root):
    spec = importlib.util.spec_from_file_location("corpus_data", os.path.join(root, "corpus_data.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Run:
    """One script run under one library."""

    lib: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    losses: list
    error: str = ""  # the first error, one line
    stopped: str = ""  # set when max_backward ended the run
    ulps: list = field(default_factory=list)  # half the unit of each loss's last printed digit


def _losses(text, pattern):
    """Every number the pattern's groups capture, in order (a pattern may capture several per match)."""
    out = []
    if pattern is None:
        return out
    for match in re.finditer(pattern, text):
        for value in match.groups():
            try:
                out.append(float(value))
            except (TypeError, ValueError):
                pass
    return out


def first_error(stderr):
    """'ExcType: message [file.py:LINE: code] <- library/file.py:LINE' from the last traceback in stderr: the script
    frame closest to the raise, then the frame that raised; or the last line of stderr."""
    lines = stderr.rstrip().splitlines()
    if not lines:
        return "no output on stderr"
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")),
                default=None)
    if start is None:
        return lines[-1].strip()
    frames, i, exc = [], start + 1, ""
    while i < len(lines):
        line = lines[i]
        m = re.match(r'\s+File "([^"]+)", line (\d+)', line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].lstrip().startswith("File ") else ""
            frames.append((m.group(1), int(m.group(2)), code))
        elif line and not line[0].isspace():
            exc = line.strip()
            break
        i += 1
    where = ""
    for path, lineno, code in reversed(frames):
        if os.path.sep + WORKDIR + os.path.sep in path:
            where = f" [{path.split(os.path.sep + WORKDIR + os.path.sep)[-1]}:{lineno}: {code}]"
            break
    if frames and where and os.path.sep + WORKDIR + os.path.sep not in frames[-1][0]:
        path, lineno, _ = frames[-1]  # where the library raised, below the script's line
        for anchor in ("site-packages", "package"):
            if os.path.sep + anchor + os.path.sep in path:
                path = path.split(os.path.sep + anchor + os.path.sep)[-1]
                break
        where += f" <- {path}:{lineno}"
    return (exc or lines[-1].strip()) + where


def _pseudo_terminal(rows=24, columns=80):
    """(controller, terminal) file descriptors of a new pseudo-terminal whose window is rows x columns."""
    import fcntl
    import pty
    import struct
    import termios
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    return controller, terminal


def run_script(name, lib="webgrad", device="cpu", root=None, keep=None):
    """Run SCRIPTS[name] once under `lib` ('webgrad' or 'torch') in a fresh interpreter; returns a Run."""
    script = SCRIPTS[name]
    root = root or default_root()
    folder = os.path.join(root, "corpus", script.folder or name)
    if not os.path.isfile(os.path.join(folder, script.entry)):
        return Run(lib, -1, "", "", 0.0, [], error=f"corpus file {os.path.join(folder, script.entry)} is missing "
                   "(see tests/compat/corpus_manifest.json for its source)")
    base = keep or tempfile.mkdtemp(prefix=f"corpus-{name}-{lib}-")
    try:
        cwd = os.path.join(base, WORKDIR)
        shutil.copytree(folder, cwd, ignore=shutil.ignore_patterns("__pycache__", ".gitignore"), dirs_exist_ok=True)
        data = _load_corpus_data(root)
        previous = os.getcwd()
        os.chdir(cwd)
        try:
            for kind, path, options in script.data:
                options = dict(options)
                if "archive" in options:
                    options["archive"] = os.path.join(cwd, options["archive"])
                data.make(kind, os.path.join(cwd, path), **options)
        finally:
            os.chdir(previous)
        for d in script.mkdirs:
            os.makedirs(os.path.join(cwd, d), exist_ok=True)
        shim = os.path.join(base, "torch-is-webgrad")
        if lib == "webgrad":  # processes the script spawns itself import torch too
            os.makedirs(os.path.join(shim, "torch"), exist_ok=True)
            with open(os.path.join(shim, "torch", "__init__.py"), "w") as f:
                f.write("import sys\nimport webgrad\ndel sys.modules['torch']\nwebgrad.as_torch()\n")
        args = list(script.args) + list(script.accel_args if device == "webgpu" else script.cpu_args)
        job = {"lib": lib, "device": device, "entry": script.entry, "args": args, "overrides": script.overrides,
               "calls": script.calls, "prepare": script.prepare, "then": script.then,
               "max_backward": script.max_backward, "shared_random": script.shares_random,
               "standin": os.path.join(root, "standin")}
        paths = [os.path.join(root, "standin")] + ([shim] if lib == "webgrad" else []) + [_package_dir()]
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg",
                   CORPUS_URLS=json.dumps({u: os.path.join(cwd, p) for u, p in script.urls.items()}),
                   PYTHONPATH=os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p]),
                   **script.env)
        # this file run as a script: the torch run never imports webgrad
        command = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(job)]
        terminal = _pseudo_terminal() if script.terminal else None
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=script.timeout,
                                  check=False, stdin=terminal[1] if terminal else subprocess.DEVNULL)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            def text(v):
                return v.decode(errors="replace") if isinstance(v, bytes) else (v or "")
            rc, out, err = -9, text(e.stdout), text(e.stderr) + f"\nTimeoutError: no end after {script.timeout:g} s"
        finally:
            for fd in terminal or ():
                os.close(fd)
        seconds = time.perf_counter() - t0
        out, _, tail = out.partition(CHILD_MARK)
        judged = _judged_lines(out, script)
        run = Run(lib, rc, out, err, seconds, _losses(judged, script.loss_re), stopped=tail.strip(),
                  ulps=_decimals(judged, script.loss_re))
        if rc != 0:
            run.error = first_error(err)
        return run
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)


@dataclass
class Verdict:
    name: str
    ok: bool
    detail: str
    webgrad: Run = None
    torch: Run = None


def _finite(values):
    return all(math.isfinite(v) for v in values)


def _falls(values):
    if len(values) < 2:
        return False
    half = len(values) // 2
    first, second = values[:half], values[len(values) - half:]
    return sum(second) / len(second) < sum(first) / len(first) or values[-1] < values[0]


def _decimals(text, pattern):
    """The unit of the last printed digit of each loss: printing rounds, so half of it is tolerated."""
    out = []
    if pattern is None:
        return out
    for match in re.finditer(pattern, text):
        for value in match.groups():
            if value is None:
                continue
            mantissa, _, exponent = value.lower().partition("e")
            digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
            out.append(0.5 * 10.0 ** ((int(exponent) if exponent else 0) - digits))
    return out


def _judged_lines(text, script):
    """The printed text but the lines ignore_re matches (timings...): what losses and output are read from."""
    if not script.ignore_re:
        return text
    return "\n".join(line for line in text.splitlines() if not re.search(script.ignore_re, line))


def masked_output(text, script):
    """compare='output': the printed lines with the numbers loss_re matches and object addresses masked, and the
    lines ignore_re matches left out (idempotent: a recorded reference holds the masked lines)."""
    lines = [line.rstrip() for line in _judged_lines(text, script).splitlines()]
    masked = re.sub(script.loss_re, "#", "\n".join(lines))
    return re.sub(r"0x[0-9a-fA-F]+", "0x#", masked).splitlines()


def judge(name, run, reference=None, device="cpu"):
    """The verdict on a webgrad run (and the torch run it is compared with, for compare='exact' or 'output')."""
    script = SCRIPTS[name]
    if device == "webgpu" and script.accel_changes_data:
        reference = None
    losses = run.losses
    if run.returncode != 0:
        return Verdict(name, False, run.error, run, reference)
    if script.loss_re is None:
        return Verdict(name, True, "runs: completed (it prints no number to judge by)", run, reference)
    if not losses:
        return Verdict(name, False, "no loss printed (loss_re matched nothing)", run, reference)
    if not _finite(losses):
        return Verdict(name, False, f"non-finite loss: {losses[:8]}", run, reference)
    if script.compare == "trend" and not _falls(losses):
        return Verdict(name, False, f"losses do not fall: {losses[:3]} ... {losses[-3:]}", run, reference)
    summary = f"{len(losses)} losses, {losses[0]:.4g} -> {losses[-1]:.4g}"
    if script.compare not in ("exact", "output") or reference is None:
        mode = "runs (its accelerator path loads data otherwise)" if (
            device == "webgpu" and script.accel_changes_data) else script.compare
        return Verdict(name, True, f"{mode}: {summary}", run, reference)
    if reference.returncode != 0:
        return Verdict(name, False, f"torch reference failed: {reference.error}", run, reference)
    if script.compare == "output":  # the text first: a line that differs explains a count that does
        ours, torchs = masked_output(run.stdout, script), masked_output(reference.stdout, script)
        for i, (a, b) in enumerate(itertools.zip_longest(ours, torchs, fillvalue="")):
            if a != b:
                return Verdict(name, False, f"output line {i + 1} reads {a!r}, torch's {b!r}", run, reference)
    theirs = reference.losses
    if len(theirs) != len(losses):
        return Verdict(name, False, f"{len(losses)} losses printed, torch printed {len(theirs)}", run, reference)
    ulps = [max(a, b) for a, b in zip(run.ulps, reference.ulps)]
    worst, where = 0.0, -1
    for i, (a, b) in enumerate(zip(losses, theirs)):
        excess = abs(a - b) - (script.atol + script.rtol * abs(b) + (ulps[i] if i < len(ulps) else 0.0))
        if excess > worst:
            worst, where = excess, i
    if where >= 0:
        return Verdict(name, False, f"loss {where} is {losses[where]:.6g}, torch's {theirs[where]:.6g} "
                       f"(rtol {script.rtol:g})", run, reference)
    return Verdict(name, True, f"{script.compare}: {summary}, as {reference.lib} (rtol {script.rtol:g})", run,
                   reference)


# ------------------------------------------------------------------------------- recorded torch references

REFERENCE_FILE = "corpus_reference.json"
COMPARED = ("exact", "output")  # the modes judged against torch's run


# fields hashed only when set: adding them kept the recorded keys
UNSET_UNHASHED = ("ignore_re", "shared_random", "then", "terminal")
# stand-in modules hashed only into the keys of the scripts that import them (one added for a new script leaves
# every recorded key as it was); every other file of standin/ is hashed into every key, its README.md too, so a new
# stand-in is described in its own docstring and in this module's, not there
OPTIONAL_STANDINS = ("torchviz.py", "tiktoken.py", "tqdm.py")


def _imported_modules(paths):
    """The top-level names the Python files among `paths` import (a script and its sibling modules)."""
    names = set()
    for path in paths:
        if path.endswith(".py"):
            with open(path, encoding="utf-8", errors="replace") as f:
                names.update(re.findall(r"(?m)^\s*(?:import|from)\s+(\w+)", f.read()))
    return names


def reference_key(name, root=None):
    """A hash of everything a script's losses depend on but the library: its table entry, its files, the data
    generator, the stand-ins and the shared random source. A recorded reference counts only under the same key."""
    import hashlib
    import inspect
    root = root or default_root()
    script = SCRIPTS[name]
    h = hashlib.sha256()
    entry = {k: v for k, v in vars(script).items() if k not in ("source", "compare", "rtol", "atol", "timeout",
                                                                  "kind", "note", "accel_args",
                                                                  "accel_changes_data")
             and not (k in UNSET_UNHASHED and v is None)}
    entry = json.loads(json.dumps(entry, default=str))  # a call's positions (int) beside its keywords (str)
    h.update(json.dumps(entry, sort_keys=True).encode())
    h.update(inspect.getsource(_shared_random).encode())
    folders = [os.path.join(root, "corpus", script.folder or name), os.path.join(root, "standin")]
    paths = [os.path.join(root, "corpus_data.py")]
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            paths += [os.path.join(dirpath, f) for f in sorted(filenames) if not f.endswith(".pyc")]
    imported = _imported_modules([p for p in paths if p.startswith(folders[0] + os.sep)])
    paths = [p for p in paths if os.path.basename(p) not in OPTIONAL_STANDINS
             or os.path.dirname(p) != folders[1] or os.path.basename(p)[:-3] in imported]
    for path in paths:
        h.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:16]


def recorded(name, root=None):
    """The torch run recorded for `name` (a Run without output), if its key still matches; else None."""
    root = root or default_root()
    path = os.path.join(root, REFERENCE_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        entry = json.load(f).get(name)
    if not entry or entry["key"] != reference_key(name, root):
        return None
    return Run(f"torch {entry['torch']} (recorded)", 0, "\n".join(entry.get("text", [])), "", 0.0, entry["losses"],
               ulps=entry["ulps"])


def record(names, root=None, log=print):
    """Run the real torch on the 'exact' and 'output' scripts among `names` and store their losses (and, for
    'output', their masked output) in corpus_reference.json."""
    root = root or default_root()
    path = os.path.join(root, REFERENCE_FILE)
    table = {}
    if os.path.isfile(path):
        with open(path) as f:
            table = {k: v for k, v in json.load(f).items() if k in SCRIPTS and SCRIPTS[k].compare in COMPARED}
    version = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, check=False).stdout.strip()
    for name in names:
        if SCRIPTS[name].compare not in COMPARED:
            continue
        run = run_script(name, "torch", "cpu", root)
        if run.returncode != 0 or not run.losses:
            log(f"FAIL {name}: torch run failed: {run.error or 'no loss printed'}")
            continue
        table[name] = {"key": reference_key(name, root), "torch": version, "losses": run.losses, "ulps": run.ulps}
        if SCRIPTS[name].compare == "output":
            table[name]["text"] = masked_output(run.stdout, SCRIPTS[name])
        log(f"ok   {name}: {len(run.losses)} losses recorded")
    with open(path, "w") as f:  # one script a line
        f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(table.items())) + "\n}\n")
    return path


def check(name, device="cpu", with_torch=False, root=None):
    """Run one script under webgrad and judge it; an 'exact' script is compared with its recorded torch losses, or
    with a fresh torch run when none is recorded for its current key and `with_torch` is set."""
    run = run_script(name, "webgrad", device, root)
    reference = None
    if SCRIPTS[name].compare in COMPARED and run.returncode == 0:
        reference = recorded(name, root)
        if reference is None and with_torch:
            reference = run_script(name, "torch", "cpu", root)
    return judge(name, run, reference, device)


# the licence of each source repository (a notice travels with every copy of their files)
LICENSES = {"pytorch/examples": "BSD-3-Clause", "pytorch/tutorials": "BSD-3-Clause", "karpathy/nanoGPT": "MIT",
            "karpathy/minGPT": "MIT", "karpathy/makemore": "MIT", "karpathy/ng-video-lecture": "none stated",
            "yunjey/pytorch-tutorial": "MIT", "eriklindernoren/PyTorch-GAN": "MIT",
            "jcjohnson/pytorch-examples": "MIT", "MorvanZhou/PyTorch-Tutorial": "MIT", "graykode/nlp-tutorial": "MIT",
            "rasbt/LLMs-from-scratch": "Apache-2.0", "aladdinpersson/Machine-Learning-Collection": "MIT",
            "kuangliu/pytorch-cifar": "MIT", "hunkim/PyTorchZeroToAll": "none stated",
            "lucidrains/vit-pytorch": "MIT"}


def write_manifest(root=None):
    """tests/compat/corpus_manifest.json: every corpus file's source, its repository's licence and SHA-256."""
    import hashlib
    root = root or default_root()
    corpus = os.path.join(root, "corpus")
    files = {}
    for dirpath, dirnames, filenames in sorted(os.walk(corpus)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for filename in sorted(filenames):
            if filename == ".gitignore":
                continue
            path = os.path.join(dirpath, filename)
            with open(path, "rb") as f:
                data = f.read()
            first = data.split(b"\n", 1)[0].decode()
            source = first[len("# source: "):] if first.startswith("# source: ") else ""
            repo = "/".join(source.split("/")[3:5])
            files[os.path.relpath(path, corpus).replace(os.sep, "/")] = {
                "source": source, "license": LICENSES.get(repo, "unknown"), "sha256": hashlib.sha256(data).hexdigest()}
    path = os.path.join(root, "corpus_manifest.json")
    with open(path, "w") as f:
        json.dump(files, f, indent=1, sort_keys=True)
        f.write("\n")
    return path, len(files)


def verify_manifest(root=None):
    """Names of corpus files missing or different from the manifest."""
    import hashlib
    root = root or default_root()
    with open(os.path.join(root, "corpus_manifest.json")) as f:
        manifest = json.load(f)
    bad = []
    for rel, entry in manifest.items():
        path = os.path.join(root, "corpus", rel)
        if not os.path.isfile(path):
            bad.append(f"{rel} (missing)")
            continue
        with open(path, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != entry["sha256"]:
                bad.append(f"{rel} (changed)")
    return bad


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m webgrad.testing.corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "webgpu"))
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these scripts only")
    parser.add_argument("--torch", action="store_true",
                        help="also run each script under the real torch: compare 'exact' ones, report the others")
    parser.add_argument("--lib", default="webgrad", choices=("webgrad", "torch"),
                        help="the library whose runs are judged (torch: check the corpus itself runs on torch)")
    parser.add_argument("--root", default=None, help="the folder holding corpus/, standin/, corpus_data.py")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each run's output tail")
    parser.add_argument("--write-manifest", action="store_true", help=write_manifest.__doc__)
    parser.add_argument("--record", action="store_true", help=record.__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(json.loads(args.child))
    root = args.root or default_root()
    if args.write_manifest:
        path, n = write_manifest(root)
        print(f"wrote {path}: {n} files")
        return 0
    names = args.only or list(SCRIPTS)
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        parser.error(f"unknown script(s) {', '.join(unknown)}; known: {', '.join(SCRIPTS)}")
    if args.record:
        print(f"wrote {record(names, root)}")
        return 0
    if os.path.isfile(os.path.join(root, "corpus_manifest.json")):
        for problem in verify_manifest(root):
            print(f"warning: corpus file {problem} (tests/compat/corpus_manifest.json)")
    ok = 0
    for name in names:
        run = run_script(name, args.lib, args.device, root)
        reference = None
        if args.torch and args.lib == "webgrad":
            reference = run_script(name, "torch", "cpu", root)
        elif args.lib == "webgrad" and SCRIPTS[name].compare in COMPARED:
            reference = recorded(name, root)
        verdict = judge(name, run, reference if SCRIPTS[name].compare in COMPARED else None, args.device)
        ok += verdict.ok
        extra = ""
        if reference is not None and SCRIPTS[name].compare not in COMPARED:
            extra = " | torch: " + ("ran" if reference.returncode == 0 else reference.error)
        print(f"{'ok  ' if verdict.ok else 'FAIL'} {name:36s} {verdict.detail} ({run.seconds:.1f} s){extra}",
              flush=True)
        if args.verbose:
            for r in (run, reference):
                if r is not None:
                    print(f"  --- {r.lib} stdout tail ---\n" + "\n".join("  " + s for s in r.stdout.splitlines()[-8:]))
                    if r.returncode != 0:
                        tail = r.stderr.splitlines()[-12:]
                        print(f"  --- {r.lib} stderr tail ---\n" + "\n".join("  " + s for s in tail))
    print(f"corpus {args.device}{'' if args.lib == 'webgrad' else ' (torch)'}: ok {ok} of {len(names)}")
    return 0 if ok == len(names) else 1


# ------------------------------------------------------------------------------------------------------- the child

CHILD_MARK = "\n@@corpus-end@@"


class _StepCap(BaseException):
    """Raised at the (max_backward + 1)-th backward call; a BaseException so the script's handlers let it pass."""


def _compile(path, overrides, calls=None):
    """The script's code, with the named constant assignments' values replaced, and the named calls' literal
    arguments (by position or keyword), at module level or directly under `if __name__ == "__main__":`."""
    calls = calls or {}
    with open(path, "rb") as f:
        source = f.read()
    tree = ast.parse(source, path)
    seen, called = set(), set()

    def value(v, like):  # a dict or list (a script's config) is written as its literal
        node = ast.parse(repr(v), mode="eval").body if isinstance(v, (dict, list)) else ast.Constant(v)
        return ast.fix_missing_locations(ast.copy_location(node, like))

    def called_name(call):  # f(...) or obj.method(...): the name the table's calls use
        return getattr(call.func, "id", None) or getattr(call.func, "attr", None)

    def call_key(call):  # the call's own text (`range(5000)`), when the table names one call of several, or its name
        text = ast.unparse(call)
        return text if text in calls else called_name(call)

    def replace_arguments(call):
        name = call_key(call)
        for key, v in calls[name].items():
            position = int(key) if str(key).isdigit() else None  # a table read back from JSON has str keys
            if position is not None and position < len(call.args):
                call.args[position] = value(v, call.args[position])
                continue
            keyword = next((k for k in call.keywords if k.arg == key), None)
            if keyword is None:
                raise ValueError(f"calls[{name!r}]: {name}() at line {call.lineno} of {path} has no argument {key!r}")
            keyword.value = value(v, keyword.value)
        called.add(name)

    def visit(body):
        for node in body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name) and target.id in overrides:
                    node.value = value(overrides[target.id], node.value)
                    seen.add(target.id)
                elif (isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                      and len(target.elts) == len(node.value.elts)):
                    for i, elt in enumerate(target.elts):
                        if isinstance(elt, ast.Name) and elt.id in overrides:
                            node.value.elts[i] = value(overrides[elt.id], node.value.elts[i])
                            seen.add(elt.id)
            elif (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                  and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"):
                visit(node.body)
            call = node.iter if isinstance(node, ast.For) else getattr(node, "value", None)  # `for e in range(N)`
            if (isinstance(node, (ast.Expr, ast.Assign, ast.For)) and isinstance(call, ast.Call)
                    and call_key(call) in calls):
                replace_arguments(call)

    if overrides or calls:
        visit(tree.body)
        missing = sorted(set(overrides) - seen)
        if missing:
            raise ValueError(f"overrides {missing} match no constant assignment in {path}")
        missing = sorted(set(calls) - called)
        if missing:
            raise ValueError(f"calls {missing} match no call in {path}")
    return compile(tree, path, "exec")


def _shared_random(torch, np):
    """Make torch's random functions draw from NumPy streams, one per function, reseeded by manual_seed: the same
    numbers under webgrad and the real torch. Only names a script reaches are replaced."""
    import zlib
    state = {"seed": 0, "streams": {}}

    def stream(kind):
        if kind not in state["streams"]:
            seed = (state["seed"] * 1000003 + zlib.crc32(kind.encode())) % 2**32
            state["streams"][kind] = np.random.RandomState(seed)
        return state["streams"][kind]

    def shape_of(args, kwargs):
        if "size" in kwargs:
            size = kwargs.pop("size")
            return (int(size),) if isinstance(size, int) else tuple(int(s) for s in size)
        if len(args) == 1 and not isinstance(args[0], int):
            return tuple(int(s) for s in args[0])
        return tuple(int(s) for s in args)

    def make(values, dtype=None, device=None, requires_grad=False, like=None):
        if dtype is None:
            dtype = like.dtype if like is not None else None
        if values.dtype.kind == "f" and dtype is None:
            dtype = getattr(torch, "get_default_dtype", lambda: torch.float32)()
        if values.dtype == np.float64 and dtype is not None and "64" not in str(dtype):
            values = values.astype(np.float32)
        t = torch.tensor(values) if dtype is None else torch.tensor(values, dtype=dtype)
        device = device if device is not None else (like.device if like is not None else None)
        if device is not None:
            t = t.to(device)
        return t.requires_grad_() if requires_grad else t

    def options(kwargs):
        kwargs.pop("generator", None)
        kwargs.pop("out", None)
        kwargs.pop("layout", None)
        kwargs.pop("pin_memory", None)
        return {k: kwargs.pop(k) for k in ("dtype", "device", "requires_grad") if k in kwargs}

    originals = {}

    def replace(owner, name, fn):
        if getattr(owner, name, None) is not None:
            originals[(owner, name)] = getattr(owner, name)
            setattr(owner, name, fn)

    def manual_seed(seed):
        state["seed"], state["streams"] = int(seed), {}
        return originals[(torch, "manual_seed")](seed)

    def rand(*args, **kwargs):
        opts = options(kwargs)
        return make(stream("rand").random_sample(shape_of(args, kwargs)), **opts)

    def randn(*args, **kwargs):
        opts = options(kwargs)
        return make(stream("randn").standard_normal(shape_of(args, kwargs)), **opts)

    def randint(*args, **kwargs):
        opts = options(kwargs)
        ints = [a for a in args if isinstance(a, int)]
        rest = [a for a in args if not isinstance(a, int)]
        low = kwargs.pop("low", 0)
        high = kwargs.pop("high", None)
        if high is None:
            low, high = (ints[0], ints[1]) if len(ints) >= 2 else (low, ints[0])
        shape = shape_of(rest, kwargs)
        return make(stream("randint").randint(low, high, size=shape).astype(np.int64), **opts)

    def randperm(n, **kwargs):
        opts = options(kwargs)
        return make(stream("randperm").permutation(int(n)).astype(np.int64), **opts)

    def rand_like(x, **kwargs):
        opts = options(kwargs)
        return make(stream("rand").random_sample(tuple(x.shape)), like=x, **opts)

    def randn_like(x, **kwargs):
        opts = options(kwargs)
        return make(stream("randn").standard_normal(tuple(x.shape)), like=x, **opts)

    def normal(mean=0.0, std=1.0, *args, **kwargs):
        opts = options(kwargs)
        if hasattr(mean, "shape") or hasattr(std, "shape"):
            shapes = [tuple(v.shape) for v in (mean, std) if hasattr(v, "shape")]
            like = mean if hasattr(mean, "shape") else std
            z = make(stream("normal").standard_normal(np.broadcast_shapes(*shapes)), like=like)
            return mean + std * z
        return make(stream("normal").normal(mean, std, size=shape_of(args, kwargs)), **opts)

    def host(x):
        return np.asarray(x.detach().cpu().double().tolist(), dtype=np.float64)

    def multinomial(input, num_samples, replacement=False, **kwargs):
        options(kwargs)
        probs = host(input)
        rows = probs.reshape(-1, probs.shape[-1])
        picks = [stream("multinomial").choice(len(r), size=num_samples, replace=replacement, p=r / r.sum())
                 for r in rows]
        out = np.asarray(picks, dtype=np.int64).reshape(probs.shape[:-1] + (num_samples,))
        return make(out, device=input.device)

    def categorical_sample(self, sample_shape=()):  # torch draws through multinomial, webgrad by Gumbel-max
        sample_shape = (int(sample_shape),) if isinstance(sample_shape, int) else tuple(int(s) for s in sample_shape)
        probs = host(self.probs)
        rows, count = probs.reshape(-1, probs.shape[-1]), int(np.prod(sample_shape, dtype=np.int64))
        picks = np.asarray([stream("categorical").choice(len(r), size=count, p=r / r.sum()) for r in rows])
        out = picks.T.reshape(sample_shape + probs.shape[:-1]).astype(np.int64)
        return make(out, device=self.probs.device)

    def bernoulli(input, p=None, **kwargs):
        options(kwargs)
        probs = host(input) if p is None else np.full(tuple(input.shape), p)
        return make((stream("bernoulli").random_sample(probs.shape) < probs).astype(np.float64), like=input)

    def fill(tensor, values):
        with torch.no_grad():
            tensor.copy_(make(values, like=tensor))
        return tensor

    def uniform_(self, a=0.0, b=1.0, **kwargs):
        return fill(self, stream("uniform_").uniform(a, b, size=tuple(self.shape)))

    def normal_(self, mean=0.0, std=1.0, **kwargs):
        return fill(self, stream("normal_").normal(mean, std, size=tuple(self.shape)))

    def bernoulli_(self, p=0.5, **kwargs):
        return fill(self, (stream("bernoulli").random_sample(tuple(self.shape)) < p).astype(np.float64))

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return input
        keep = (stream("dropout").random_sample(tuple(input.shape)) >= p).astype(np.float64) / (1.0 - p)
        return input * make(keep, like=input)

    def dropout_forward(self, input):
        return dropout(input, self.p, self.training, self.inplace)

    def sampler_iter(self):  # lazy, as torch's: minGPT asks for 10**10 samples with replacement
        n, left = len(self.data_source), self.num_samples
        while left > 0:
            chunk = stream("sampler").randint(0, n, size=min(left, 1024)) if self.replacement else \
                stream("sampler").permutation(n)[:left]
            yield from chunk.tolist()
            left -= len(chunk)

    replace(torch, "manual_seed", manual_seed)
    for name, fn in (("rand", rand), ("randn", randn), ("randint", randint), ("randperm", randperm),
                     ("rand_like", rand_like), ("randn_like", randn_like), ("normal", normal),
                     ("multinomial", multinomial), ("bernoulli", bernoulli)):
        replace(torch, name, fn)
    for name, fn in (("uniform_", uniform_), ("normal_", normal_), ("bernoulli_", bernoulli_)):
        replace(torch.Tensor, name, fn)
    replace(torch.nn.functional, "dropout", dropout)
    replace(torch.nn.Dropout, "forward", dropout_forward)
    replace(torch.utils.data.RandomSampler, "__iter__", sampler_iter)
    replace(torch.distributions.Categorical, "sample", categorical_sample)


def _run_as_main(path, code, args):
    main_module = types.ModuleType("__main__")
    main_module.__file__, main_module.__builtins__ = path, builtins
    sys.modules["__main__"] = main_module
    sys.argv = [path] + list(args)
    exec(code, main_module.__dict__)  # noqa: S102  (running the script is the point)
    return main_module.__dict__


def _child(job):
    """Run one script in this (fresh) interpreter; called as `python .../corpus.py --child JOB`."""
    import random

    import numpy as np
    cwd = os.getcwd()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [cwd, job["standin"]] + [p for p in sys.path if os.path.abspath(p or ".") not in (here, cwd)]
    if job["lib"] == "webgrad":
        import webgrad
        torch = webgrad.as_torch()
        if job["device"] == "webgpu":
            webgrad.set_default_device("webgpu")
    else:
        import torch
        if job["device"] == "webgpu":  # the real torch with webgrad's "webgpu" device: torch.accelerator finds it
            import webgrad.torch_device  # noqa: F401
    if hasattr(torch, "set_num_threads"):
        torch.set_num_threads(1)
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)  # a script that never seeds still runs the same way twice (its 'trend' cannot flake)
    if job["shared_random"]:
        _shared_random(torch, np)
    cap = job["max_backward"]
    if cap:
        backward, calls = torch.Tensor.backward, [0]

        def capped_backward(self, *args, **kwargs):
            if calls[0] >= cap:
                raise _StepCap()
            calls[0] += 1
            return backward(self, *args, **kwargs)
        torch.Tensor.backward = capped_backward
    for name, overrides in job["prepare"]:  # the sibling scripts its readme runs first, each as __main__
        _run_as_main(os.path.join(cwd, name), _compile(os.path.join(cwd, name), overrides), [])
    path = os.path.join(cwd, job["entry"])
    code = _compile(path, job["overrides"], job["calls"])
    stopped = ""
    try:
        namespace = _run_as_main(path, code, job["args"])
        if job["then"]:
            namespace[job["then"]]()
    except _StepCap:
        stopped = f"stopped after {cap} backward calls (max_backward)"
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    sys.stdout.flush()
    sys.stdout.write(CHILD_MARK + stopped + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
