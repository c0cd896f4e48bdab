// Adam and AdamW over several parameters in one dispatch: adam4_group runs adam4's update (optim.wgsl's
// adam_update, the same rounding) for each member of a group of parameters. An optimizer step is one small dispatch
// per parameter otherwise, and each costs a dispatch's start and drain however small the parameter (a GPT of 6
// layers has 76 parameters, most of them LayerNorm's and biases of 384 to 1536 entries). The Python side is
// optim.py's adam_group_launch, called by the adam_steps kernel (torch.optim.Adam / AdamW's step, eager and so
// recorded).
//
// A thread updates one vec4 of one member (the GPU variant of adam4: optim_vec4_per_thread = 1). Workgroups are
// dealt out member by member: member k owns workgroups [first, first + ceil(n / 4 / WORKGROUP)). Every offset is a
// multiple of 4 (adam4's launches only), and a partial last vec4 is stored back as loaded past the parameter's end,
// as adam4 does. Each member reads its own hyperparameter slots (lr and step are the parameter's dynamic scalars).
//
// Bindings, spliced in by optim.py (GROUP_BINDINGS, GROUP_CASES): member k's parameter, gradient, exp_avg,
// exp_avg_sq and, with AMSGRAD, max_exp_avg_sq at consecutive numbers from 0; then the dynamic scalars, in the
// skipping variant the skip flag and the skipped-step counts, and the member table (uniform). They reuse
// optim.wgsl's binding numbers: no entry point reads both, which WGSL allows.
//
// The skipping variant (a step GradScaler's inf flag or a failed device-side check may skip: optim.wgsl's SKIP_IF
// and COUNT_SKIPS) splices in group_skipped(), count_skip() and skipped_count() over its two bindings; the other
// splices functions that skip nothing. A skipped member's first thread counts the skip in its word of the counts
// (one buffer for every member); the bias corrections take step minus that count, as adam4's.

//! include "optim.wgsl"

struct AdamMember {
    at: vec4<u32>,               // n, the parameter's and gradient's offsets in vec4s, the member's first workgroup
    st: vec4<u32>,               // exp_avg's, exp_avg_sq's and max_exp_avg_sq's offsets in vec4s, then where its
                                 // skipped-step count is in the counts (in f32s)
    slots: array<vec4<u32>, 3>,  // optim.wgsl's Adam hyperparameter slots 0..9 (then two unused)
}

struct AdamGroup {
    members: u32,
    skip_offset: u32,            // where the skip flag is in its buffer
    unused1: u32,
    unused2: u32,
    member: array<AdamMember, GROUP_MAX>,
}

//! splice GROUP_BINDINGS

fn member_hyper(s: array<vec4<u32>, 3>, skipped_at: u32) -> AdamHyper {
    let lr = group_scalars[s[0].x];
    let step = group_scalars[s[0].y] - skipped_count(skipped_at);
    let step_size = lr / -expm1_f32(step * group_scalars[s[1].z]);
    let inv_sqrt_bc2 = inverseSqrt(-expm1_f32(step * group_scalars[s[1].w]));
    return AdamHyper(lr, group_scalars[s[0].z], group_scalars[s[0].w], group_scalars[s[1].x], group_scalars[s[1].y],
                     group_scalars[s[2].x], group_scalars[s[2].y], step_size, inv_sqrt_bc2);
}

@compute @workgroup_size(WORKGROUP)
fn adam4_group(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var k = 0u;
    for (var i = 1u; i < group_table.members; i++) {
        if (wid.x >= group_table.member[i].at.w) { k = i; }
    }
    let m = group_table.member[k];
    if (group_skipped()) {
        if (wid.x == m.at.w && lid == 0u) { count_skip(m.st.w); }
        return;
    }
    let j = (wid.x - m.at.w) * WORKGROUP + lid;  // this thread's vec4 of member k
    if (j >= (m.at.x + 3u) / 4u) { return; }
    let own = vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(m.at.x);
    let h = member_hyper(m.slots, m.st.w);
    switch (k) {
//! splice GROUP_CASES
        default: {}
    }
}
