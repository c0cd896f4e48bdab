// The WebGPU adapter line at the top of the page, or, without WebGPU, what to do about it.
// The page asks for its own adapter: it describes the same GPU the worker trains on, and it works
// before (and even if not) Python has booted.

const HOW_TO = "Use a browser with WebGPU: Chrome or Edge 113+ on Windows, macOS or ChromeOS, Safari 26+, or " +
  "Firefox 141+ on Windows; on Linux start Chromium with <code>--enable-unsafe-webgpu</code> " +
  "<code>--enable-features=Vulkan</code>. The page must come from https:// or http://127.0.0.1 (a secure context).";

// Limits worth knowing for training: how big a tensor or a kernel's shared memory may be.
const LIMITS = [
  ["maxStorageBufferBindingSize", "largest tensor", (v) => `${(v / 2 ** 20).toFixed(0)} MiB`],
  ["maxBufferSize", "largest buffer", (v) => `${(v / 2 ** 20).toFixed(0)} MiB`],
  ["maxComputeWorkgroupStorageSize", "workgroup memory", (v) => `${v / 1024} KiB`],
  ["maxComputeInvocationsPerWorkgroup", "threads per workgroup", String],
];
const FEATURES = ["shader-f16", "subgroups", "timestamp-query"];

// Fills `el`; resolves to true when WebGPU is usable.
export async function showAdapter(el) {
  if (!("gpu" in navigator)) {
    return missing(el, "WebGPU is not available in this browser (navigator.gpu is missing).");
  }
  let adapter;
  try {
    adapter = await navigator.gpu.requestAdapter();
  } catch (err) {
    return missing(el, `WebGPU is present but requesting an adapter failed: ${err.message || err}.`);
  }
  if (!adapter) {
    return missing(el, "WebGPU is present but no GPU adapter is available (the GPU may be blocklisted or disabled).");
  }
  const i = adapter.info || {};
  el.classList.remove("missing");
  el.replaceChildren();
  const line = document.createElement("p");
  line.className = "adapter";
  line.textContent = `WebGPU adapter: vendor ${i.vendor || "?"}, architecture ${i.architecture || "?"}` +
    (i.description ? `, ${i.description}` : "");
  const dl = document.createElement("dl");
  dl.className = "limits";
  for (const [key, label, fmt] of LIMITS) {
    if (adapter.limits[key] !== undefined) add(dl, label, fmt(adapter.limits[key]), key);
  }
  add(dl, "features", FEATURES.filter((f) => adapter.features.has(f)).join(", ") || "none of " + FEATURES.join(", "));
  el.append(line, dl);
  return true;
}

function add(dl, label, value, title) {
  const dt = document.createElement("dt"), dd = document.createElement("dd");
  dt.textContent = label;
  if (title) dt.title = title;
  dd.textContent = value;
  dl.append(dt, dd);
}

function missing(el, why) {
  el.classList.add("missing");
  el.replaceChildren();
  const p = document.createElement("p");
  p.textContent = `${why} `;
  p.insertAdjacentHTML("beforeend", HOW_TO); // our own constant: the flags are set in <code>
  el.append(p);
  document.body.dataset.gpu = "none";
  document.getElementById("nogpu").hidden = false;
  return false;
}
