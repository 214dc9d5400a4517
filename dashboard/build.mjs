// Builds the dashboard into memsvc/http/static/: one bundled, minified script, the
// stylesheet, the icon and the page, which the HTTP listener serves at /. The output is
// committed so installing memsvc needs no network; `make dashboard` runs this
// after generating src/gen, and `make check-proto` fails when it is stale.
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { build } from "esbuild";

const out = "../memsvc/http/static";
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["src/main.tsx"],
  outfile: `${out}/dashboard.js`,
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  jsx: "automatic",
  jsxImportSource: "preact",
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync("src/index.html", `${out}/index.html`);
copyFileSync("src/style.css", `${out}/dashboard.css`);
copyFileSync("src/favicon.svg", `${out}/favicon.svg`);
