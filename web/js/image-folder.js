// "Your images" in the worker: a folder of one subfolder per class (what <input webkitdirectory> gives:
// File objects whose webkitRelativePath is "folder/class/.../name.png"), decoded with createImageBitmap,
// drawn at size x size on an OffscreenCanvas (so images of other sizes are resized) and packed as planar
// RGB uint8, [N, 3, size, size], the layout the GPU tensor takes. Non-image files and images the browser
// cannot decode are skipped and counted. The pixels never leave the machine.

export const IMAGE_TYPES = /\.(png|jpe?g|gif|bmp|webp|avif|ico)$/i;

// {classes, labels: Uint8Array, pixels: Uint8Array, skipped, resized, name}; throws Error with a message for
// the page when nothing usable is there. limit: the most bytes one GPU buffer may hold.
export async function decodeFolder(files, size, limit, onProgress = () => {}) {
  const classNames = new Set();
  const images = [];
  let skipped = 0, name = "your images";
  for (const file of files) {
    const parts = (file.webkitRelativePath || file.name).split("/");
    if (parts.length >= 2) name = parts[0];
    if (parts.length < 3) { // not inside a class folder
      skipped++;
      continue;
    }
    classNames.add(parts[1]);
    if (IMAGE_TYPES.test(file.name)) images.push({ file, cls: parts[1] });
    else skipped++;
  }
  const classes = [...classNames].sort(); // as torchvision's ImageFolder: class index = sorted name order
  if (classes.length < 2) {
    throw new Error(`${name}: found ${classes.length} class folder${classes.length === 1 ? "" : "s"}` +
      `${classes.length ? ` (${classes[0]})` : ""}; a classifier needs at least 2: put the images of each class ` +
      "in a subfolder of their own (e.g. cats/, dogs/)");
  }
  if (classes.length > 255) throw new Error(`${name}: ${classes.length} class folders; at most 255 are supported`);
  const per = 3 * size * size, needed = images.length * per;
  if (limit && needed > limit) {
    throw new Error(`${name} is too large for this GPU: its ${images.length} images at ${size}x${size} need ` +
      `${formatBytes(needed)} of GPU memory in one buffer, and this GPU allows at most ${formatBytes(limit)} per ` +
      "buffer (maxStorageBufferBindingSize). Use fewer or smaller images.");
  }
  images.sort((a, b) => (a.cls === b.cls ? (a.file.webkitRelativePath < b.file.webkitRelativePath ? -1 : 1) :
    (a.cls < b.cls ? -1 : 1)));
  const canvas = new OffscreenCanvas(size, size);
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  const pixels = new Uint8Array(needed);
  const labels = [];
  let n = 0, resized = 0, undecodable = 0;
  for (const { file, cls } of images) {
    let bitmap;
    try {
      bitmap = await createImageBitmap(file);
    } catch {
      undecodable++;
      continue;
    }
    if (bitmap.width !== size || bitmap.height !== size) resized++;
    ctx.clearRect(0, 0, size, size);
    ctx.drawImage(bitmap, 0, 0, size, size);
    bitmap.close();
    const rgba = ctx.getImageData(0, 0, size, size).data;
    const base = n * per, plane = size * size;
    for (let k = 0; k < plane; k++) {
      pixels[base + k] = rgba[4 * k];
      pixels[base + plane + k] = rgba[4 * k + 1];
      pixels[base + 2 * plane + k] = rgba[4 * k + 2];
    }
    labels.push(classes.indexOf(cls));
    n++;
    if (n % 50 === 0) onProgress(n, images.length);
  }
  if (n === 0) throw new Error(`${name}: no image could be decoded (${skipped + undecodable} files skipped)`);
  return { classes, labels: new Uint8Array(labels), pixels: pixels.slice(0, n * per), skipped: skipped + undecodable,
    resized, name };
}

export function formatBytes(n) {
  if (n < 2 ** 20) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 2 ** 30) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${(n / 2 ** 30).toFixed(2)} GiB`;
}
