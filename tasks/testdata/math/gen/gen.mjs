// Writes verl-style parquet test files (the columns verl's
// examples/data_preprocess/gsm8k.py produces) from GSM8K JSONL rows, with an
// independent writer: Apache Arrow JS and parquet-wasm (arrow-rs).
//
//   node gen.mjs SRC.jsonl DST.parquet N SPLIT [NULL_ROW]
//
// takes the first N rows of SRC; NULL_ROW (1-based), when given, writes that
// row's reward_model.ground_truth as null (a malformed file for the tests).
// Run `npm ci` here first. CI does not run this: the outputs are committed.
import fs from 'node:fs';
import * as arrow from 'apache-arrow';
import * as pq from 'parquet-wasm/esm';

const [, , src, dst, nStr, split, nullRowStr] = process.argv;
const n = Number(nStr);
const nullRow = nullRowStr ? Number(nullRowStr) : 0;
const lines = fs.readFileSync(src, 'utf8').split('\n').filter((l) => l.trim()).slice(0, n);
const instruction = 'Let\'s think step by step and output the final answer after "####".';
const rows = lines.map((l, i) => {
  const r = JSON.parse(l);
  const gt = r.answer.split('#### ').pop().replace(/,/g, '').trim();
  return {
    data_source: 'openai/gsm8k',
    prompt: [{ content: r.question + ' ' + instruction, role: 'user' }],
    ability: 'math',
    reward_model: { ground_truth: i + 1 === nullRow ? null : gt, style: 'rule' },
    extra_info: { answer: r.answer, index: BigInt(i), question: r.question, split },
  };
});

const U = () => new arrow.Utf8();
const f = (name, type) => new arrow.Field(name, type, true);
const message = new arrow.Struct([f('content', U()), f('role', U())]);
const types = {
  data_source: U(),
  prompt: new arrow.List(f('item', message)),
  ability: U(),
  reward_model: new arrow.Struct([f('ground_truth', U()), f('style', U())]),
  extra_info: new arrow.Struct([f('answer', U()), f('index', new arrow.Int64()), f('question', U()), f('split', U())]),
};
const cols = {};
for (const [k, ty] of Object.entries(types)) cols[k] = arrow.vectorFromArray(rows.map((r) => r[k]), ty);
const table = new arrow.Table(cols);

const wasm = fs.readFileSync(new URL('./node_modules/parquet-wasm/esm/parquet_wasm_bg.wasm', import.meta.url));
await pq.default(wasm);
const props = new pq.WriterPropertiesBuilder().setCompression(pq.Compression.SNAPPY).build();
fs.writeFileSync(dst, pq.writeParquet(pq.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')), props));
console.log(`${dst}: ${rows.length} rows`);
