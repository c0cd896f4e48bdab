"""The WebGPU backend: one runtime (runtime.py), two bindings (native.py: wgpu-py; browser.py: Pyodide's
JS FFI), and one module per kernel family whose WGSL lives in the repository's shaders/ folder.

    runtime.py       buffer pool, caches, command batching, read-back, capture/replay, dynamic scalars
    backend.py       WebGPUBackend: the device interface (_backends/interface.py), routing to the families
    views.py         checking and simplifying the views kernels receive
    shaders.py       loading .wgsl files (installed package first, then the source checkout)
    elementwise.py   fill, copy, unary, unary_backward, binary, where      shaders/elementwise.wgsl
                     (the ops and their WGSL cases come from the op table, webgrad/ops/table.py)
    reduce.py        sum, prod, max, min, argmax, argmin                   shaders/reduce.wgsl
    softmax_loss.py  softmax, log-softmax, fused cross-entropy             shaders/softmax_loss.wgsl
    index.py         index_select, gather and their backward               shaders/index.wgsl
    rng.py           counter-based random numbers                          shaders/random.wgsl
    matmul.py        batched matmul (+bias, relu), planned by matmul_plan  shaders/matmul.wgsl
    conv.py          conv2d and its gradients (the matmul kernel, gathering the image),
                     im2col, col2im, max/avg pooling                       shaders/conv_pool.wgsl
    optim.py         fused SGD, Adam/AdamW, RMSprop steps                  shaders/optim.wgsl
    conv_gemm.py     implicit-GEMM convolutions of GPU adapters            shaders/conv_gemm.wgsl
    conv_direct.py   narrow convolutions, a thread per output block        shaders/conv_direct.wgsl
    winograd.py      3x3 stride-1 convolutions, Winograd F(2x2)/F(4x4)     shaders/winograd.wgsl
                     (winograd_transforms.py writes the transforms out from their matrices)
    batch_norm.py    batch norm's statistics, normalisation and gradients  shaders/batch_norm.wgsl
    fusion.py        at a captured step's seal: batch norm + residual add + ReLU into one dispatch;
                     a gradient's add + ReLU backward; ReLU backward into a Winograd input gradient

Adding a kernel: write the entry point in its family's .wgsl (WGSL `override` constants for what
varies; integer codes the Python side owns are injected as `const`s, see shaders.py); declare it in
the family module as `Kernel(shader, entry, bindings, overrides)` with an explicit binding layout; pack
its uniform with `struct` and call `runtime.dispatch(kernel, kernel.constants(...), storages, params,
groups)`. Pipelines, bind groups and uniforms are cached by the runtime; a hot kernel can also keep its
`runtime.launch(...)` in `runtime.memo` (see elementwise.launch). A new elementwise op is one record
in webgrad/ops/table.py and nothing here.

Importing this package does not touch the GPU; create_backend() does.
"""


def create_backend():
    """The WebGPU backend on the process-wide runtime (raises a RuntimeError explaining how to enable
    WebGPU when there is none)."""
    from .backend import WebGPUBackend

    return WebGPUBackend()
