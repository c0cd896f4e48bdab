// The elementwise entry points for the op table's records marked heavy (ops/table.py): elementwise.wgsl compiled
// with those records' cases only and special.wgsl's functions, which they call (lgamma, Bessel functions, ...).
// A module of their own, so that every other elementwise pipeline does not compile this code (on a software
// adapter that took each pipeline from 0.03 s to 2 s).
//! include "special.wgsl"
//! include "elementwise.wgsl"
