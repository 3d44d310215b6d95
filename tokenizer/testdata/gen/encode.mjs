// encode.mjs encodes texts with a model directory's tokenizer through
// @huggingface/tokenizers, the reference the Go tests compare with when a
// tokenizer has no committed goldens (the reduced Qwen3 tokenizer in
// assets/wordprob-qwen3, whose corpus the Go test draws).
//
//	node encode.mjs MODEL_DIR TEXTS.json
//
// TEXTS.json is a JSON array of strings. Prints one JSON object: the
// reference's name and version, and per text its ids (no special tokens
// added) and their decoding (special tokens kept, no clean-up).
import { existsSync, readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { Tokenizer } from "@huggingface/tokenizers";

const here = new URL(".", import.meta.url).pathname;
const refVersion = JSON.parse(readFileSync(here + "node_modules/@huggingface/tokenizers/package.json", "utf8")).version;
const [dir, textsPath] = process.argv.slice(2);
if (!dir || !textsPath) {
  console.error("usage: node encode.mjs MODEL_DIR TEXTS.json");
  process.exit(2);
}
const tokPath = dir + "/tokenizer.json";
const json = JSON.parse(existsSync(tokPath) ? readFileSync(tokPath, "utf8") : gunzipSync(readFileSync(tokPath + ".gz")).toString("utf8"));
const config = JSON.parse(readFileSync(dir + "/tokenizer_config.json", "utf8"));
const tok = new Tokenizer(json, config);
const cases = JSON.parse(readFileSync(textsPath, "utf8")).map((text) => {
  const ids = tok.encode(text, { add_special_tokens: false }).ids;
  return { ids, decoded: tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) };
});
process.stdout.write(JSON.stringify({ reference: "@huggingface/tokenizers " + refVersion, cases }) + "\n");
