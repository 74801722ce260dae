// The README's examples compile, and run: each ```ts block (and those of the
// repository's README, compiled only) is written to
// build/readme/NN.ts and compiled with tsc against the package (imported by its name,
// as a user's code does). With HSEARCH_TEST_URL set (the repository's live test), each
// block marked `ts` alone (not `ts browser`) then runs with node, its URL replaced by
// that one and HSEARCH_API_KEY set to HSEARCH_TEST_README_KEY; its output is kept in
// build/readme/NN.out for that test to read. Exits 1 when one fails.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const README_URL = "http://127.0.0.1:8000";
const url = process.env.HSEARCH_TEST_URL;
const out = join(root, "build", "readme");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const EXAMPLE = /^```ts( browser)?\n([\s\S]*?)^```$/gm;
const readme = readFileSync(join(root, "README.md"), "utf8");
const blocks = [...readme.matchAll(EXAMPLE)].map((m, i) => ({
  name: String(i + 1).padStart(2, "0"),
  runs: m[1] === undefined,
  code: m[2],
}));
if (blocks.length === 0) {
  console.error("README.md has no ```ts example");
  process.exit(1);
}
// The repository's README shows the client too, from a browser: compiled, not run.
const top = join(root, "..", "..", "README.md");
const shown = existsSync(top) ? [...readFileSync(top, "utf8").matchAll(EXAMPLE)] : [];
shown.forEach((m, i) => blocks.push({ name: `top-${i + 1}`, runs: false, code: m[2] }));
for (const block of blocks) {
  const code = url && block.runs ? block.code.replaceAll(README_URL, url) : block.code;
  writeFileSync(join(out, `${block.name}.ts`), code);
}
writeFileSync(
  join(out, "tsconfig.json"),
  JSON.stringify({
    extends: "../../tsconfig.json",
    compilerOptions: {
      types: ["node"],
      rootDir: ".",
      outDir: "js",
      declaration: false,
      sourceMap: false,
      noUnusedLocals: false,
    },
    include: ["*.ts"],
  }),
);
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
try {
  execFileSync(process.execPath, [tsc, "-p", out], { stdio: "inherit" });
} catch {
  console.error("the README's examples do not compile (build/readme)");
  process.exit(1);
}
const own = blocks.length - shown.length;
console.log(`the README's ${own} examples compile, and the repository README's ${shown.length}`);

if (url) {
  const env = { ...process.env, HSEARCH_API_KEY: process.env.HSEARCH_TEST_README_KEY ?? "" };
  for (const block of blocks.filter((b) => b.runs)) {
    const script = join(out, "js", `${block.name}.js`);
    try {
      const printed = execFileSync(process.execPath, [script], { env, encoding: "utf8", timeout: 120_000 });
      writeFileSync(join(out, `${block.name}.out`), printed);
      console.log(`README example ${block.name} ran`);
    } catch (error) {
      console.error(`README example ${block.name} failed:\n${error.stdout ?? ""}${error.stderr ?? ""}`);
      process.exit(1);
    }
  }
}
