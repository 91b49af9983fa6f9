#!/usr/bin/env python3
"""Writes ggml-vocab-NAME.random.inp/.out: random texts and the ids llama.cpp gives them.

    python3 gen_random.py LLAMA_TOKENIZE VOCAB_DIR

LLAMA_TOKENIZE is llama.cpp's llama-tokenize (these files: build b10587), VOCAB_DIR holds the
uncompressed ggml-vocab-NAME.gguf files. Texts mix ASCII, contractions, digits of several
scripts, letters in and out of deepseek's ranges, CJK, Hangul, non-ASCII whitespace and
punctuation, marks, emoji, Unicode 15.1 additions, random code points and invalid UTF-8 bytes.
The same seed gives the same texts.
"""
import os, random, subprocess, sys, tempfile

COUNTS = {'deepseek-llm': 400, 'deepseek-coder': 400, 'falcon': 400, 'qwen2': 400,
          'gpt-2': 150, 'phi-3': 150, 'starcoder': 150, 'mpt': 150, 'refact': 150, 'llama-bpe': 150}
SEP = b"\n__ggml_vocab_test__\n"

ALPHA = list("aZéßstmdrevlSTREVL019 '\",.!?()[]{}<>$+=^~|`_-:;@#%&*/\\") + \
  ["re","ve","ll","'s","'T","'RE"," ","  ","   ","\t","\n","\r\n","\r","\n\n","\v","\f","\x1c","\x00","\x7f",
   "\u00a0","\u3000","\u2028","\u2029","\u0085","\u1680","\u2003","\u202f","\u205f","\u200b","\ufeff",
   "٣","Ⅻ","½","１","²","৩","〇",
   "µ","ƻ","Ω","Ω","K","Å","ｚ","Ａ","𐐀","𞤀","ǅ","ʔ","ʰ","ー","ㄱ","가","힣","퟿","ࠀ","ऄ","क","ि","龥","龦","日本語","中文","\U0002EBF0","\u2FFC","\u31EF","\U00020000","𝕏",
   "！","／","：","～","‘","’","“","‟","。","、","«","¿","¡","—","…","€","©","°","±","😀","👍🏽","🇺🇸","\u0301","\u0308","\ufffd",
   "ἀ","ῼ","Ѐ","ԯ","Ա","Ⴀ","Ꭰ","Ⰰ","Ⲁ","Ꙁ","ﬀ","ﬓ","𑢠","Ǆ","ʯ","Ͱ","ͷ","ʕ","ƺ","ƿ","ʼ",
   "Hello","world"," the","don't","I'm","3.14159","1234567","x=1;","def f(x):","<s>","</s>","<|endoftext|>","<｜begin▁of▁sentence｜>","▁"]

# Appended to every suite: texts on which dropping or changing one rule of the deepseek-llm,
# deepseek-coder or falcon pre-tokenizer changes the ids (found by mutating the Go splitters),
# so that the suites catch it.
TARGETED = [
    "<=re  \u043c\u0438\u0440\u00fc\vT", "  .", "   ->", "\v\u00df \u00bd", "\u3000'\u300212345678\x1c \u00bd\u3002",
    " \u043c\u0438\u0440\u3001,\u00f1:  \u65e5", "->\uff01`   \u65e5\u672c\u00ab\u02c8", "a_b\u200b&&\u4e2d\u6587 \u00bd\u30fc\u028a\u200b",
    " \n\uff0c\u2019 `\u00fc\u00fc,\uff5a", "!` \nf(x)", "\U0001e900\x00\u08001234\U0001e900\uff0fa", "\u03a9<1234\uff0f\uac00\n1234",
    "\u9fa6{}\u03a3  `", "\t`\t\t`!\uff08", "  \u3000", "\uff01'  \u3000\r", "\u00a0 \u3000!m", "'\uff1a7~\u00a0 \u3000",
]


def texts(n, seed=7):
    random.seed(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(random.randint(0, 16)):
            r = random.random()
            if r < 0.85:
                parts.append(random.choice(ALPHA))
            elif r < 0.95:
                parts.append(chr(random.choice([random.randint(0x80, 0x2fff), random.randint(0x3000, 0xd7ff),
                                                random.randint(0xe000, 0xffff), random.randint(0x10000, 0x2ffff)])))
            else:
                parts.append(None)  # one invalid byte
        out.append(b''.join(p.encode('utf-8') if p is not None else bytes([random.randint(0x80, 0xff)]) for p in parts))
    return out


def main():
    tool, vocab_dir = sys.argv[1], sys.argv[2]
    all_texts = texts(max(COUNTS.values()))
    targeted = [t.encode('utf-8') for t in TARGETED]
    with tempfile.TemporaryDirectory() as tmp:
        for name, n in COUNTS.items():
            model = os.path.join(vocab_dir, 'ggml-vocab-%s.gguf' % name)
            lines = []
            suite = all_texts[:n] + targeted
            for t in suite:
                assert SEP not in t
                path = os.path.join(tmp, 'text')
                with open(path, 'wb') as f:
                    f.write(t)
                res = subprocess.run([tool, '-m', model, '-f', path, '--ids', '--no-bos', '--no-parse-special',
                                      '--no-escape', '--log-disable'], capture_output=True, text=True, check=True)
                ids = res.stdout.strip()
                assert ids.startswith('[') and ids.endswith(']'), ids
                lines.append(''.join(' %d' % int(x) for x in ids.strip('[]').split(',') if x.strip()))
            assert suite[-1] != b''  # an empty last text would vanish from the .inp
            with open('ggml-vocab-%s.random.inp' % name, 'wb') as f:
                f.write(SEP.join(suite))
            with open('ggml-vocab-%s.random.out' % name, 'w') as f:
                f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
