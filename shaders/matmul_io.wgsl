// The bindings and uniform parameters shared by the two matmul kernels: matmul.wgsl (tiled through
// workgroup memory, for GPUs) and matmul_cpu.wgsl (register-blocked, for software adapters). One
// layout lets matmul_plan.py pack Params once for either. a, b and out are each declared twice (scalar
// and vec4 views of one binding); an entry point uses one view of each, which WGSL allows.
//
// Element types: matmul.py splices ELEMENT_TYPES below (typed.py element_types): the aliases AT (a,
// binding 0), BT (b, binding 1), OT (out, binding 2) and CT (the bias, binding 3), and to_OT/to_OT4, the
// f32 -> OT rounding of a store. float32 everywhere (the software adapters' matmul_cpu.wgsl has only that
// variant), or float16 operands and output for matmul.wgsl (the module then starts with `enable f16;`):
// halves are converted to f32 as they are staged into the f32 workgroup tiles, products and sums run in
// f32 and the result is rounded once at the store (autocast's numerics, as cuBLAS's half GEMMs). A
// split-K product keeps its partial tiles in f32: its main kernel has OT = f32, its reduction AT = f32. A third
// type, f32h (typed.py), is float32 storage read and stored through float16 rounding: a product reading an f32h
// operand computes what it would on a float16 copy, one storing f32h what a float16 result cast to f32 holds
// (cast_folding.py folds autocast's casts of a product's result back to float32 into the product so).
// from_AT4/from_BT4 convert staged pieces.
//! splice ELEMENT_TYPES

struct Params {
    M: u32, N: u32, K: u32, ntiles: u32,        // ntiles = ceil(K / BK)
    a_off: u32, b_off: u32, o_off: u32, bias_off: u32,
    a_bs: u32, b_bs: u32, lda: u32, ldb: u32,   // lda = K (or M if TRANS_A); ldb = N (or K if TRANS_B)
    items: u32,        // reduce items per output matrix (1: a plain batched product)
    split_steps: u32,  // K steps (of items * ntiles) per split
    splits: u32,       // K split across workgroups (1: none; else out is the scratch buffer)
    batch: u32,        // output matrices
    // B_GATHER geometry (see unfolded4; the window and output row width are G_KH, G_KW, G_OW): the
    // g_h x g_w image planes, stride, dilation and padding; dilation and padding are signed (the input
    // gradient of a convolution is a convolution of the output gradient with negated dilation and padding).
    g_h: u32, g_w: u32, g_sy: u32, g_sx: u32,
    g_dy: i32, g_dx: i32, g_py: i32, g_px: i32,
}

@group(0) @binding(0) var<storage, read> a1: array<AT>;
@group(0) @binding(0) var<storage, read> a4: array<vec4<AT>>;
@group(0) @binding(1) var<storage, read> b1: array<BT>;
@group(0) @binding(1) var<storage, read> b4: array<vec4<BT>>;
@group(0) @binding(2) var<storage, read_write> out: array<OT>;
@group(0) @binding(2) var<storage, read_write> out4: array<vec4<OT>>;
@group(0) @binding(3) var<storage, read> bias: array<CT>;
@group(0) @binding(4) var<uniform> P: Params;
