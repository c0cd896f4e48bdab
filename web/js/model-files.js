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
