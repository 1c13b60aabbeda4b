// Runs one benchmark case in its own process: `node child.mjs <case> <export> '<json params>'`.
// Prints the result as one JSON line prefixed with "RESULT ".
const [, , file, fn, json] = process.argv;
const mod = await import(new URL(`../cases/${file}.mjs`, import.meta.url).href);
const result = await mod[fn](JSON.parse(json ?? "{}"));
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
process.exit(0);
