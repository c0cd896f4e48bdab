"""torch.utils.tensorboard.SummaryWriter: scalars written to TensorBoard's event files (see _records.py), which
`tensorboard --logdir` reads; no TensorBoard or protobuf package is needed.

add_scalar and add_scalars write what torch's writer writes (add_scalars one run per tag, in
``log_dir/<main_tag>_<tag>``, as torch's). The other add_* methods (histograms, images, graphs, text, ...) warn
once each and record nothing.
"""

import os
import socket
import time
import warnings

from . import _records

_uid = [0]  # torch's event files number themselves within a process
_warned = set()


def _number(value, what):
    """A Python float from a number, a one-element tensor (webgrad's, torch's) or a NumPy scalar."""
    if hasattr(value, "item"):
        if hasattr(value, "numel") and value.numel() != 1:
            raise AssertionError(f"Tensor should contain one element (0 dimensions). Was given size: "
                                 f"{value.numel()} and {getattr(value, 'ndim', '?')} dimensions.")
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what}: expected a number or a one-element tensor, got {type(value).__name__}")
    return float(value)


class FileWriter:
    """One event file in log_dir (created on construction): records are buffered, written by flush() (called
    every flush_secs and when max_queue records wait) and close()."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self.log_dir = str(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        _uid[0] += 1
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{_uid[0]}"
                f"{filename_suffix}")
        self.path = os.path.join(self.log_dir, name)
        self.max_queue, self.flush_secs = max_queue, flush_secs
        self._pending, self._last_flush, self._closed = [], time.time(), False
        with open(self.path, "wb") as f:
            f.write(_records.record(_records.event(time.time(), file_version="brain.Event:2")))

    def get_logdir(self):
        return self.log_dir

    def add_event(self, serialized):
        if self._closed:
            raise RuntimeError(f"this SummaryWriter's event file {self.path} is closed")
        self._pending.append(_records.record(serialized))
        if len(self._pending) >= self.max_queue or time.time() - self._last_flush >= self.flush_secs:
            self.flush()

    def add_summary(self, summary, global_step=None, walltime=None):
        self.add_event(_records.event(time.time() if walltime is None else walltime, step=global_step,
                                      summary=summary))

    def flush(self):
        if self._pending:
            with open(self.path, "ab") as f:
                f.write(b"".join(self._pending))
            self._pending = []
        self._last_flush = time.time()

    def close(self):
        if not self._closed:
            self.flush()
            self._closed = True


class SummaryWriter:
    """Writes scalars to TensorBoard event files in log_dir (default ``runs/<date>_<host><comment>``)."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            from datetime import datetime
            log_dir = os.path.join("runs", datetime.now().strftime("%b%d_%H-%M-%S") + "_" + socket.gethostname()
                                   + comment)
        self.log_dir = str(log_dir)
        self.purge_step, self.max_queue, self.flush_secs = purge_step, max_queue, flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._get_file_writer()

    def _get_file_writer(self):
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:  # TensorBoard hides the events of this run after purge_step
                now = time.time()
                self.file_writer.add_event(_records.event(now, step=self.purge_step, file_version="brain.Event:2"))
                self.file_writer.add_event(_records.event(now, step=self.purge_step, session_start=True))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        return self.log_dir

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """Record scalar_value (a number or one-element tensor) under tag at global_step."""
        value = _number(scalar_value, "add_scalar")
        self._get_file_writer().add_summary(_records.scalar_summary(tag, value), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several scalars in one chart: each tag is a run of its own, log_dir/<main_tag>_<tag>, tagged main_tag."""
        walltime = time.time() if walltime is None else walltime
        logdir = self._get_file_writer().get_logdir()
        for tag, scalar_value in tag_scalar_dict.items():
            run = logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            writer = self.all_writers.get(run)
            if writer is None:
                writer = self.all_writers[run] = FileWriter(run, self.max_queue, self.flush_secs,
                                                            self.filename_suffix)
            writer.add_summary(_records.scalar_summary(main_tag, _number(scalar_value, "add_scalars")),
                               global_step, walltime)

    def flush(self):
        if self.all_writers is not None:
            for writer in self.all_writers.values():
                writer.flush()

    def close(self):
        if self.all_writers is not None:
            for writer in self.all_writers.values():
                writer.close()
            self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _records_nothing(name):
    def method(self, *args, **kwargs):
        if name not in _warned:
            _warned.add(name)
            warnings.warn(f"SummaryWriter.{name}: webgrad's SummaryWriter writes scalars only (add_scalar, "
                          "add_scalars); this call records nothing", stacklevel=2)
    method.__name__ = name
    method.__doc__ = "Not recorded by webgrad (warns once): only add_scalar and add_scalars write events."
    return method


for _name in ("add_hparams", "add_tensor", "add_histogram", "add_histogram_raw", "add_image", "add_images",
              "add_image_with_boxes", "add_figure", "add_video", "add_audio", "add_text", "add_onnx_graph",
              "add_graph", "add_embedding", "add_pr_curve", "add_pr_curve_raw", "add_custom_scalars_multilinechart",
              "add_custom_scalars_marginchart", "add_custom_scalars", "add_mesh"):
    setattr(SummaryWriter, _name, _records_nothing(_name))
