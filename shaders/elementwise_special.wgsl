// The elementwise entry points for one of the op table's records marked heavy (ops/table.py): elementwise.wgsl
// compiled with that record's cases alone and special.wgsl's functions, which it calls (lgamma, Bessel functions,
// ...). A module for each such record (webgpu/elementwise.py's heavy_kernels), so that a pipeline compiles only
// the special functions its op reaches (in one module with every record, a software adapter took 2 s for each
// elementwise pipeline, against 0.03 s).
//! include "special.wgsl"
//! include "elementwise.wgsl"
