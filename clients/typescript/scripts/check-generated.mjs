// The committed types (src/openapi.ts) are what `npm run generate` makes of an OpenAPI
// document: openapi.json by default, or the one named (the repository's test gives the
// app's current document). Exits 1, saying how to fix it, when they differ.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const document = resolve(process.argv[2] ?? join(root, "openapi.json"));
const committed = join(root, "src", "openapi.ts");
const scratch = mkdtempSync(join(tmpdir(), "hsearch-openapi-"));
try {
  const generated = join(scratch, "openapi.ts");
  const cli = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
  execFileSync(process.execPath, [cli, document, "--output", generated], { stdio: "pipe" });
  if (readFileSync(generated, "utf8") !== readFileSync(committed, "utf8")) {
    console.error(
      `src/openapi.ts is stale against ${document}: from the repository's root run ` +
        "`python -m hsearch_api.openapi`, then `npm run generate` in clients/typescript",
    );
    process.exit(1);
  }
  console.log(`src/openapi.ts matches ${document}`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
