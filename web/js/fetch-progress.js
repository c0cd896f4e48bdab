// Byte-counting fetches, for the boot progress bars. Used by the worker.

// Read a response's body to the end, calling onChunk(chunk, soFar) as chunks arrive (soFar: the bytes
// read until then, a view); resolves to a Uint8Array.
// `expected` (optional) preallocates the result when the final size is known.
export async function readBody(response, onChunk, expected = 0) {
  const reader = response.body.getReader();
  let out = new Uint8Array(expected), size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.length > out.length) { // grow (the size was not known, or was wrong)
      const bigger = new Uint8Array(Math.max(out.length * 2, size + value.length));
      bigger.set(out.subarray(0, size));
      out = bigger;
    }
    out.set(value, size);
    size += value.length;
    onChunk(value, out.subarray(0, size));
  }
  return size === out.length ? out : out.slice(0, size);
}

// A fetch() that reports every byte its responses deliver: onBytes(url, loaded, total) where total is
// the Content-Length (0 when unknown). The response keeps its headers, so
// WebAssembly.instantiateStreaming still accepts it. Pyodide's loader fetches through this.
export function countingFetch(onBytes, inner = self.fetch.bind(self)) {
  return async (input, init) => {
    const response = await inner(input, init);
    if (!response.ok || !response.body) return response;
    const url = response.url || String(input);
    // With Content-Encoding the length is the compressed size, not what the stream yields.
    const total = response.headers.get("Content-Encoding") ? 0 : Number(response.headers.get("Content-Length") || 0);
    let loaded = 0;
    onBytes(url, 0, total);
    const counted = response.body.pipeThrough(new TransformStream({
      transform(chunk, controller) {
        loaded += chunk.length;
        onBytes(url, loaded, total);
        controller.enqueue(chunk);
      },
    }));
    return new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
