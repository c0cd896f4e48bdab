// Does Dawn (npm `webgpu`, Chrome's WebGPU implementation) offer matrix units (tensor cores) to WGSL on this
// GPU, and what do they give? Lists the adapter's subgroup-matrix configurations
// (chromium-experimental-subgroup-matrix), then for each floating-point one times a plain D x D x D matrix
// product written with subgroup matrices (one subgroup per tile straight from storage, and four subgroups
// sharing workgroup tiles), checked exactly on integer inputs. Run with Node 26:
//   node tools/coop_matrix_probe.mjs [--webgpu node_modules/webgpu] [--size 4096] [--toggle NAME]... [--only I:VARIANT]
// --toggle enables a Dawn toggle (e.g. vulkan_enable_f16_on_nvidia: without it Dawn offers NVIDIA's Vulkan
// driver no shader-f16, and so no f16 configurations); --only runs one configuration index and variant name
// prefix (a driver crash then takes only that one). What it found on NVIDIA GPUs is in docs/PERFORMANCE.md ("What limits speed").
import path from "node:path";
import { pathToFileURL } from "node:url";

const opt = { webgpu: "node_modules/webgpu", size: 4096, toggle: [], only: null };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, ""), value = process.argv[i + 1];
  if (!(key in opt) || value === undefined) { console.error(`coop_matrix_probe: unknown or incomplete option ${process.argv[i]}`); process.exit(2); }
  if (key === "toggle") opt.toggle.push(value); else opt[key] = key === "size" ? Number(value) : value;
}
const D = opt.size;
const { create, globals } = await import(pathToFileURL(path.resolve(opt.webgpu, "index.js")).href);
Object.assign(globalThis, globals);
// subgroup matrices are an experimental ("unsafe") API in Dawn; raw timestamps for the timing
const gpu = create([`enable-dawn-features=${["allow_unsafe_apis", ...opt.toggle].join(",")}`,
  "disable-dawn-features=timestamp_quantization"]);
const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
if (!adapter) { console.log("no WebGPU adapter"); process.exit(1); }
const info = adapter.info;
console.log(`adapter: ${info.vendor} ${info.device || info.description}; subgroup size ${info.subgroupMinSize}-${info.subgroupMaxSize}`);
console.log(`shader-f16: ${adapter.features.has("shader-f16")}`);
const configs = [...(info.subgroupMatrixConfigs || [])].map((c) => ({ ct: c.componentType, rt: c.resultComponentType, M: c.M, N: c.N, K: c.K }));
console.log(`subgroup-matrix configurations: ${JSON.stringify(configs)}`);
if (!adapter.features.has("chromium-experimental-subgroup-matrix")) {
  console.log("chromium-experimental-subgroup-matrix: not offered");
  process.exit(0);
}
const device = await adapter.requestDevice({
  requiredFeatures: ["chromium-experimental-subgroup-matrix", "subgroups", "shader-f16"].filter((f) => adapter.features.has(f)),
  requiredLimits: { maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize, maxBufferSize: adapter.limits.maxBufferSize },
});

const types = (c) => [`subgroup_matrix_left<${c.ct}, ${c.K}, ${c.M}>`, `subgroup_matrix_right<${c.ct}, ${c.N}, ${c.K}>`, `subgroup_matrix_result<${c.rt}, ${c.N}, ${c.M}>`];
const HEAD = "enable f16;\nenable chromium_experimental_subgroup_matrix;\n";

// One subgroup per workgroup, TM x TN fragments, operands straight from storage.
function direct(c, TM, TN) {
  const [L, R, O] = types(c);
  let decl = "", body = "", store = "";
  for (let i = 0; i < TM; i++) body += `    let a${i} = subgroupMatrixLoad<${L}, row_major>(&A, (row0 + ${i * c.M}u) * D + k, D);\n`;
  for (let j = 0; j < TN; j++) {
    body += `    let b${j} = subgroupMatrixLoad<${R}, row_major>(&B, k * D + col0 + ${j * c.N}u, D);\n`;
    for (let i = 0; i < TM; i++) body += `    acc${i}_${j} = subgroupMatrixMultiplyAccumulate(a${i}, b${j}, acc${i}_${j});\n`;
  }
  for (let i = 0; i < TM; i++) for (let j = 0; j < TN; j++) {
    decl += `  var acc${i}_${j}: ${O};\n`;
    store += `  subgroupMatrixStore<row_major>(&C, (row0 + ${i * c.M}u) * D + col0 + ${j * c.N}u, acc${i}_${j}, D);\n`;
  }
  return { tileM: TM * c.M, tileN: TN * c.N, code: `${HEAD}
@group(0) @binding(0) var<storage, read> A: array<${c.ct}>;
@group(0) @binding(1) var<storage, read> B: array<${c.ct}>;
@group(0) @binding(2) var<storage, read_write> C: array<${c.rt}>;
const D = ${D}u;
@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wg: vec3u) {
  let row0 = wg.y * ${TM * c.M}u;
  let col0 = wg.x * ${TN * c.N}u;
${decl}  for (var k = 0u; k < D; k += ${c.K}u) {
${body}  }
${store}}` };
}

// Four subgroups (2 x 2) share A and B tiles staged in workgroup memory, BK = KK * K per step.
function staged(c, TM, TN, KK) {
  const [L, R, O] = types(c);
  const BM = 2 * TM * c.M, BN = 2 * TN * c.N, BK = KK * c.K;
  let decl = "", body = "", store = "";
  for (let i = 0; i < TM; i++) for (let j = 0; j < TN; j++) {
    decl += `  var acc${i}_${j}: ${O};\n`;
    store += `  subgroupMatrixStore<row_major>(&C, (row0 + sm + ${i * c.M}u) * D + col0 + sn + ${j * c.N}u, acc${i}_${j}, D);\n`;
  }
  for (let kk = 0; kk < KK; kk++) {
    for (let i = 0; i < TM; i++) body += `    let a${i}_${kk} = subgroupMatrixLoad<${L}, row_major>(&As, (sm + ${i * c.M}u) * ${BK}u + ${kk * c.K}u, ${BK}u);\n`;
    for (let j = 0; j < TN; j++) {
      body += `    let b${j}_${kk} = subgroupMatrixLoad<${R}, row_major>(&Bs, ${kk * c.K * BN}u + sn + ${j * c.N}u, ${BN}u);\n`;
      for (let i = 0; i < TM; i++) body += `    acc${i}_${j} = subgroupMatrixMultiplyAccumulate(a${i}_${kk}, b${j}_${kk}, acc${i}_${j});\n`;
    }
  }
  // the subgroup index (lid / 32) is uniform per subgroup but not provably so: the analysis is told
  return { tileM: BM, tileN: BN, code: `${HEAD}diagnostic(off, chromium.subgroup_matrix_uniformity);
@group(0) @binding(0) var<storage, read> A: array<vec4<${c.ct}>>;
@group(0) @binding(1) var<storage, read> B: array<vec4<${c.ct}>>;
@group(0) @binding(2) var<storage, read_write> C: array<${c.rt}>;
const D = ${D}u;
var<workgroup> As: array<${c.ct}, ${BM * BK}>;
var<workgroup> Bs: array<${c.ct}, ${BK * BN}>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row0 = wg.y * ${BM}u;
  let col0 = wg.x * ${BN}u;
  let sg = lid / 32u;
  let sm = (sg / 2u) * ${TM * c.M}u;
  let sn = (sg % 2u) * ${TN * c.N}u;
${decl}  for (var k = 0u; k < D; k += ${BK}u) {
    for (var e = lid; e < ${BM * BK / 4}u; e += 128u) {
      let r = e / ${BK / 4}u; let q = e % ${BK / 4}u;
      let v = A[((row0 + r) * D + k) / 4u + q];
      let o = r * ${BK}u + q * 4u;
      As[o] = v.x; As[o + 1u] = v.y; As[o + 2u] = v.z; As[o + 3u] = v.w;
    }
    for (var e = lid; e < ${BK * BN / 4}u; e += 128u) {
      let r = e / ${BN / 4}u; let q = e % ${BN / 4}u;
      let v = B[((k + r) * D + col0) / 4u + q];
      let o = r * ${BN}u + q * 4u;
      Bs[o] = v.x; Bs[o + 1u] = v.y; Bs[o + 2u] = v.z; Bs[o + 3u] = v.w;
    }
    workgroupBarrier();
${body}    workgroupBarrier();
  }
${store}}` };
}

// Inputs in {-2..2}: every product and every f32 sum exact, so the check is exact.
const n = D * D, a = new Int8Array(n), b = new Int8Array(n);
{ let s = 12345; const r = () => { s = (s * 1103515245 + 12345) & 0x7fffffff; return (s >> 16) % 5 - 2; };
  for (let i = 0; i < n; i++) { a[i] = r(); b[i] = r(); } }
const HALF = { 0: 0, 1: 0x3c00, "-1": 0xbc00, 2: 0x4000, "-2": 0xc000 };
const pack = (x, t) => (t === "f16" ? Uint16Array.from(x, (v) => HALF[v]) : Float32Array.from(x));
const half = (h) => { const e = (h >> 10) & 31, m = h & 1023, s = h & 0x8000 ? -1 : 1; return e === 0 ? s * m * 2 ** -24 : s * (1 + m / 1024) * 2 ** (e - 15); };

async function run(c, k) {
  const buffer = (data, usage) => { const x = device.createBuffer({ size: data.byteLength, usage: usage | GPUBufferUsage.COPY_DST }); device.queue.writeBuffer(x, 0, data); return x; };
  const A = buffer(pack(a, c.ct), GPUBufferUsage.STORAGE), B = buffer(pack(b, c.ct), GPUBufferUsage.STORAGE);
  const bytes = n * (c.rt === "f16" ? 2 : 4);
  const C = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  device.pushErrorScope("validation");
  // (no getCompilationInfo: with the f16 toggle on an H200 it crashed the process)
  const pipeline = device.createComputePipeline({ layout: "auto", compute: { module: device.createShaderModule({ code: k.code }), entryPoint: "main" } });
  const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [A, B, C].map((x, i) => ({ binding: i, resource: { buffer: x } })) });
  const error = await device.popErrorScope();
  if (error) { console.log(`  rejected: ${error.message.split("\n")[0]}`); return; }
  console.log("  pipeline made; dispatching");
  const go = (reps) => {
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline); pass.setBindGroup(0, bindGroup);
    for (let r = 0; r < reps; r++) pass.dispatchWorkgroups(D / k.tileN, D / k.tileM);
    pass.end();
    device.queue.submit([encoder.finish()]);
    return device.queue.onSubmittedWorkDone();
  };
  await go(3);
  const reps = 20, t0 = performance.now();
  await go(reps);
  const ms = (performance.now() - t0) / reps;
  const read = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder(); encoder.copyBufferToBuffer(C, 0, read, 0, bytes); device.queue.submit([encoder.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const out = c.rt === "f16" ? new Uint16Array(read.getMappedRange()) : new Float32Array(read.getMappedRange());
  let wrong = 0;
  for (let t = 0; t < 256; t++) {  // 256 entries checked
    const i = (t * 7919) % D, j = (t * 104729) % D;
    let want = 0; for (let q = 0; q < D; q++) want += a[i * D + q] * b[q * D + j];
    const got = c.rt === "f16" ? half(out[i * D + j]) : out[i * D + j];
    if (c.rt === "f32" ? got !== want : Math.abs(got - want) > Math.abs(want) / 512 + 1) wrong++;
  }
  read.unmap();
  console.log(`  ${ms.toFixed(3)} ms per product = ${(2 * D ** 3 / ms / 1e9).toFixed(1)} TFLOP/s (wall, ${reps} in one submit); ${wrong}/256 entries wrong`);
  for (const x of [A, B, C, read]) x.destroy();
}

for (const [index, c] of configs.entries()) {
  if (!["f16", "f32"].includes(c.ct)) continue;  // integer configurations: not what training multiplies
  for (const [name, k] of [["direct 2x2", direct(c, 2, 2)], ["direct 4x2", direct(c, 4, 2)],
    ["staged 2x2", staged(c, 2, 2, 2)], ["staged 4x2", staged(c, 4, 2, 2)], ["staged 4x4", staged(c, 4, 4, 2)]]) {
    if (opt.only && !(opt.only.split(":")[0] === String(index) && name.startsWith(opt.only.split(":")[1]))) continue;
    console.log(`configuration ${index} ${JSON.stringify(c)}, ${name} (${k.tileM}x${k.tileN} tile):`);
    try { await run(c, k); } catch (e) { console.log(`  failed: ${String(e).split("\n")[0]}`); }
  }
}
process.exit(0);
