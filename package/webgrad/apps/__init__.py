"""Applications built on webgrad and shipped in its wheel: `mnist`, the browser dashboard's Python side."""
