// Builds src/ into dist/: one ES module bundle for the page, a lazily loaded chunk
// for the graph view (Cytoscape is most of the bytes; the first paint needs none of
// it) and the stylesheet, under hashed file names. The hashes make every asset
// cacheable for ever. The page itself is src/index.html: the gateway fills in its
// {{app.js}} and {{style.css}} from dist/build-info.json's "entries" (so the page's
// HTML is written once, not copied into dist/).
//
// dist/build-info.json records a hash of everything the build reads, so a unit test
// can tell (without Node) that the committed dist/ was built from the committed src/.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, rmSync, mkdirSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";

const here = new URL(".", import.meta.url).pathname;
const dist = join(here, "dist");

// Keep in step with tests/unit/test_workbench_build.py: sorted relative paths,
// each as "path\0content\0".
export const INPUTS = ["build.mjs", "package.json", "package-lock.json", "src"];

function files(path) {
  const full = join(here, path);
  try {
    return readdirSync(full, { withFileTypes: true }).flatMap((entry) =>
      files(join(path, entry.name)));
  } catch (error) {
    if (error.code !== "ENOTDIR") throw error;
    return [path.split(sep).join("/")];
  }
}

function sourceHash() {
  const hash = createHash("sha256");
  for (const path of INPUTS.flatMap(files).sort()) {
    hash.update(path + "\0");
    hash.update(readFileSync(join(here, path)));
    hash.update("\0");
  }
  return hash.digest("hex");
}

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist);
const result = await build({
  entryPoints: { app: join(here, "src/main.js"), style: join(here, "src/style.css") },
  bundle: true,
  splitting: true,
  format: "esm",
  minify: true,
  target: ["es2022"],
  outdir: join(dist, "assets"),
  entryNames: "[name]-[hash]",
  chunkNames: "[name]-[hash]",
  legalComments: "linked",
  metafile: true,
  logLevel: "warning",
});

const outputs = Object.keys(result.metafile.outputs).map((path) => relative(dist, path));
const named = (prefix, ext) => outputs.find((p) => p.startsWith(`assets/${prefix}-`) && p.endsWith(ext));
writeFileSync(join(dist, "build-info.json"), JSON.stringify({
  source_sha256: sourceHash(),
  entries: { "app.js": named("app", ".js"), "style.css": named("style", ".css") },
  files: outputs.sort(),
}, null, 1) + "\n");
console.log(`workbench: ${outputs.length} files in dist/`);
