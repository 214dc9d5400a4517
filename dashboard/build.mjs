// Builds the dashboard into memsvc/http/static/: one bundled, minified script (uPlot, the chart
// library, included), the stylesheet (uPlot's and ours), the icon and the page, which the HTTP listener serves at /. The output is
// committed so installing memsvc needs no network; `make dashboard` runs this
// after generating src/gen, and `make check-proto` fails when it is stale.
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
// uPlot's stylesheet (its legend and cursor) first, so the dashboard's own rules override it.
writeFileSync(`${out}/dashboard.css`, readFileSync("node_modules/uplot/dist/uPlot.min.css", "utf8") + "\n" +
  readFileSync("src/style.css", "utf8"));
copyFileSync("src/favicon.svg", `${out}/favicon.svg`);
