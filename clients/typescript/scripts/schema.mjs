// src/schema.ts from the server's OpenAPI document, with openapi-typescript.
//
//   node scripts/schema.mjs generate <openapi.json | URL>   writes src/schema.ts
//   node scripts/schema.mjs check <openapi.json | URL>      fails unless src/schema.ts matches byte for byte
//
// A relative path is taken from the directory npm was started in (INIT_CWD), so
// `npm --prefix clients/typescript run generate -- openapi.json` works from the repository root.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const cli = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
const committed = join(root, "src", "schema.ts");

// Defaults make a field required only on the server's side: a request may omit it, and a
// response lists it in `required` when it is always present.
const OPTIONS = ["--default-non-nullable", "false"];

function render(source, out) {
  const run = spawnSync(process.execPath, [cli, source, ...OPTIONS, "--output", out],
                        { cwd: root, encoding: "utf8" });
  if (run.status !== 0) {
    process.stderr.write(run.stdout + run.stderr);
    process.exit(run.status ?? 1);
  }
}

function firstDifference(a, b) {
  const left = a.split("\n");
  const right = b.split("\n");
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    if (left[i] !== right[i]) {
      const [have, want] = [left[i] ?? "<end of file>", right[i] ?? "<end of file>"];
      return `line ${i + 1}:\n  committed:   ${have}\n  regenerated: ${want}`;
    }
  }
  return "the files differ in their bytes only";
}

const [mode, given] = process.argv.slice(2);
if (!["generate", "check"].includes(mode) || !given) {
  console.error("usage: node scripts/schema.mjs generate|check <openapi.json | http://host/openapi.json>");
  process.exit(2);
}
const source = /^https?:\/\//.test(given) ? given : resolve(process.env.INIT_CWD ?? process.cwd(), given);

if (mode === "generate") {
  render(source, committed);
  console.log(`wrote ${committed} from ${given}`);
} else {
  const dir = mkdtempSync(join(tmpdir(), "membrane-schema-"));
  try {
    const fresh = join(dir, "schema.ts");
    render(source, fresh);
    const want = readFileSync(fresh);
    const have = readFileSync(committed);
    if (!want.equals(have)) {
      console.error(`src/schema.ts is not what the server's OpenAPI generates (${firstDifference(
        have.toString("utf8"), want.toString("utf8"))})`);
      console.error(`regenerate it: npm run generate -- ${given}`);
      process.exit(1);
    }
    console.log("src/schema.ts matches the server's OpenAPI");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
