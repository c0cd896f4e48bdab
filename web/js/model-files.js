// Export the model as a .safetensors download; import one back from a file the user picks.

export function download(bytes, filename) {
  const url = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000); // the download has started by then
}

// The bytes of a model file at `url` (this server's, or any CORS-enabled one), as {bytes, name}; throws an
// Error whose message says what went wrong in words a user can act on.
export async function fetchModel(url) {
  let response;
  try {
    response = await fetch(new URL(url, location.href));
  } catch (err) {
    throw new Error(`could not fetch ${url}: the server is unreachable, or it does not allow this page to read ` +
      `the file (CORS: it must send Access-Control-Allow-Origin) (${err.message || err})`);
  }
  if (!response.ok) throw new Error(`${url} answered ${response.status} ${response.statusText || ""}`.trim());
  const bytes = new Uint8Array(await response.arrayBuffer());
  const name = decodeURIComponent(new URL(response.url || url, location.href).pathname.split("/").pop() || "model");
  return { bytes, name };
}

// Calls onFile(bytes, name) for each file picked in `input`, then clears it so the same file can be
// picked again.
export function watchImport(input, onFile) {
  input.addEventListener("change", async () => {
    const file = input.files[0];
    if (!file) return;
    const bytes = new Uint8Array(await file.arrayBuffer());
    input.value = "";
    onFile(bytes, file.name);
  });
}
