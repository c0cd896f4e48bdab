// SGD over several parameters in one dispatch: sgd4_group runs sgd4's update (optim.wgsl's sgd_update, the
// same rounding) for each member of a group of parameters. It is what a captured step's run of sgd4 records
// becomes at its seal (fusion.py's sgd_group; the Python side is optim.py's group_launch): an optimizer step
// is one dispatch per parameter, and each costs about 3 us of a replayed step on an H200 however small the
// parameter (ResNet-18: 62 of them, 235 us of a 10.3 ms step, most of them BatchNorm's 64 to 512 weights).
//
// A thread updates one vec4 of one member (the GPU variant of sgd4: optim_vec4_per_thread = 1). Workgroups
// are dealt out member by member: member k owns workgroups [first, first + ceil(n / 4 / WORKGROUP)).
// Every offset is a multiple of 4 (sgd4's records only), and a partial last vec4 is stored back as loaded
// past the parameter's end, as sgd4 does.
//
// Bindings, spliced in by optim.py (GROUP_BINDINGS, GROUP_CASES): member k's parameter, gradient and, with
// MOMENTUM, its momentum buffer, at consecutive numbers from 0; then the dynamic scalars, the skip flag and
// the member table (uniform). They reuse optim.wgsl's binding numbers: no entry point reads both, which WGSL
// allows. How many members a group takes is bounded by the device's storage buffers per shader stage.

//! include "optim.wgsl"

struct Member {
    at: vec4<u32>,     // n, then the parameter's, gradient's and momentum buffer's offsets, in vec4s
    slots: vec4<u32>,  // where lr, momentum, 1 - dampening and weight_decay are in the scalars
    more: vec4<u32>,   // the first-step flag's slot, the member's first workgroup, unused, unused
}

struct Group {
    skip_offset: u32,
    members: u32,
    unused0: u32,
    unused1: u32,
    member: array<Member, GROUP_MAX>,
}

//! splice GROUP_BINDINGS

@compute @workgroup_size(WORKGROUP)
fn sgd4_group(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (SKIP_IF && group_skip[group_table.skip_offset] > 0.0) { return; }
    var k = 0u;
    for (var i = 1u; i < group_table.members; i++) {
        if (wid.x >= group_table.member[i].more.y) { k = i; }
    }
    let m = group_table.member[k];
    let j = (wid.x - m.more.y) * WORKGROUP + lid;  // this thread's vec4 of member k
    if (j >= (m.at.x + 3u) / 4u) { return; }
    let own = vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(m.at.x);
    let h = SgdHyper(group_scalars[m.slots.x], group_scalars[m.slots.y], group_scalars[m.slots.z],
                     group_scalars[m.slots.w], group_scalars[m.more.x] != 0.0);
    switch (k) {
//! splice GROUP_CASES
        default: {}
    }
}
