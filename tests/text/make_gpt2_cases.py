#!/usr/bin/env python3
"""GPT-2 tokenizer reference cases for tests/text: strings with the ids that Hugging Face's
GPT-2 tokenizer (transformers, backed by the `tokenizers` library) gives them, checked against
OpenAI's tiktoken loaded from the same files; id sequences with the text both decode them to.

    make_gpt2_cases.py --vocab-dir DIR write   # DIR: GPT-2's vocab.json and merges.txt
    make_gpt2_cases.py --vocab-dir DIR check   # exit 1 unless the committed files reproduce

scripts/setup-model-venv makes a venv with the pinned packages and the vocabulary;
scripts/with-model-files gpt2 --python tests/text/make_gpt2_cases.py write   runs it there.

Writes (or, with `check`, compares against):
  data/gpt2_cases.json      the cases under the whole GPT-2 vocabulary (50257 tokens)
  data/gpt2_512/            GPT-2's vocabulary cut to its first 512 ids (the 256 bytes and the
                            first 256 merges: GPT-2's ids from 256 on follow its merges' order)
  data/gpt2_512_cases.json  the cases (those of at most 400 bytes) under that vocabulary
"""
import argparse
import hashlib
import json
import os
import random
import sys
from pathlib import Path

os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local files every time, write no cache
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import tiktoken  # noqa: E402
import tokenizers  # noqa: E402
import transformers  # noqa: E402
from tiktoken.load import data_gym_to_mergeable_bpe_ranks  # noqa: E402
from transformers import GPT2Tokenizer  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------- the strings

ENGLISH = [
    "Hello world",
    "Hello, world!",
    " Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Call me Ishmael. Some years ago - never mind how long precisely - having little money.",
    "In the beginning God created the heaven and the earth.",
    "To be, or not to be, that is the question:",
    "Whether 'tis nobler in the mind to suffer the slings and arrows of outrageous fortune,",
    "All happy families are alike; each unhappy family is unhappy in its own way.",
    "Language models are unsupervised multitask learners.",
    "GPT-2 is a large transformer-based language model with 1.5 billion parameters.",
    "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were "
    "perfectly normal, thank you very much.",
    "She sells sea-shells on the sea-shore.",
    "e.g. i.e. etc. vs. a.m. p.m. U.S.A. Ph.D.",
    "Dr. Smith's office (room 4B) opens at 9:30 a.m. -- don't be late!",
    "What?! No way... really?? Yes!!!",
    "\"Quoted text,\" she said, 'and more.'",
    "hyphen-ated words and en\u2013dashes and em\u2014dashes",
    "\u201cSmart quotes\u201d and \u2018single ones\u2019 and an ellipsis\u2026",
    "camelCaseIdentifier and snake_case_identifier and SCREAMING_CASE",
    "supercalifragilisticexpialidocious",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "a",
    "I",
    "A man, a plan, a canal: Panama",
    "Colorless green ideas sleep furiously.",
    "The year 1984 was not like 1984.",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2#frag",
    "C:\\Program Files\\App\\bin\\app.exe",
    "/usr/local/bin/python3 -m pip install --upgrade pip",
    "#hashtag @mention $ticker %percent ^caret &amp *star",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
    "OK",
    "ok ok ok ok ok ok ok ok",
    "the the the the",
    "Newlines\nin\nthe\nmiddle",
    "Ends with a newline\n",
    "\nStarts with a newline",
]

CODE = [
    "def f(x):\n    return x * 2\n",
    "def greet(name: str) -> str:\n    return f\"Hello, {name}!\"\n\nprint(greet('world'))\n",
    "for i in range(10):\n\tprint(i)\n",
    "if (a && b || !c) { return -1; }",
    "#include <iostream>\nint main() {\n  std::cout << \"hi\\n\";\n  return 0;\n}\n",
    "template <typename T> constexpr T square(T x) noexcept { return x * x; }",
    "std::vector<std::pair<int, std::string>> v{{1, \"a\"}, {2, \"b\"}};",
    "x = [i**2 for i in range(100) if i % 3 == 0]",
    "lambda x, y: (x + y) / 2",
    "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
    "<html><head><title>Title</title></head><body><p class=\"x\">Hi</p></body></html>",
    "a += 1; b -= 2; c *= 3; d /= 4; e %= 5; f <<= 6; g >>= 7;",
    "x == y != z <= w >= v -> u => t :: s ... r",
    "    indented with four spaces\n        and eight\n",
    "\t\tindented with tabs\n\t\t\tthree tabs",
    "git commit -m \"Fix: handle the empty case\" && git push origin main",
    "#!/bin/sh\nset -eu\nfor f in *.txt; do echo \"$f\"; done\n",
    "fn main() { let v: Vec<u8> = vec![0xff, 0x00]; println!(\"{:?}\", v); }",
    "console.log(`template ${literal} here`);",
    "/* block comment */ // line comment\n# python comment",
    "0x7fffffff 0b1010 0o777 1e-5 3.14f 1'000'000ULL",
    "arr[i][j] = arr[i - 1][j - 1] + 1;",
    "a_b_c__d___e",
    "____init____",
    "--flag=value -x -yz --",
    "key: value\nlist:\n  - one\n  - two\n",
    "\\documentclass{article}\n\\begin{document}$E = mc^2$\\end{document}",
    "=SUM(A1:A10)*B$2",
    "print(\"\\t\\n\\r\")",
]

NUMBERS = [
    "0", "1", "12", "123", "1234", "12345", "123456789", "1234567890123456789012345",
    "3.14159265358979", "-42", "+7", "1,000,000", "1.000.000,50", "10^9", "2^31 - 1",
    "1e10", "6.022e23", "1/2 + 3/4 = 5/4", "50%", "$19.99", "\u20ac5,00", "\u00a3100",
    "2026-12-01", "12/01/2026", "23:59:59.999", "+1 (555) 123-4567", "192.168.0.1",
    "v1.2.3-rc.4", "007", "000000", "9" * 40, "1 2 3 4 5 6 7 8 9 10",
    "one1two2three3", "4th 21st 102nd 33rd", "\u00bd \u00be \u2153", "\u2460\u2461\u2462",
    "\u0663\u0664\u0665", "\u0968\u0969", "\uff11\uff12\uff13", "\u2167 \u216b",
]

CONTRACTIONS = [
    "don't", "I'm", "we'll", "they've", "you're", "she'd", "it's", "can't won't shouldn't",
    "DON'T", "I'M", "WE'LL", "THEY'VE", "YOU'RE", "SHE'D", "IT'S",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'", "''", "'''", " 's", " 't",
    "'sup", "'tis", "rock'n'roll", "o'clock", "y'all'd've", "the dog's bone", "James's",
    "'S", "'Re", "ab'c'd", "x'llx", "'ll've'd", "' s", "'\u00e9", "'1", "'!", "!'s",
    "He said 'hello'.", "I'd've done it", "\u2019s and \u2019t (curly apostrophes)",
]

WHITESPACE = [
    " ", "  ", "   ", "    ", " " * 10, " " * 33, "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n",
    "\r\n\r\n", "\r", " \n", "\n ", " \n ", "\t \t", " \t ", "a b", "a  b", "a   b", "a    b",
    "a\tb", "a\t\tb", "a\nb", "a\n\nb", "a \nb", "a\n b", "a \n b", "a  \n  b", "a\t b", "a \tb",
    " a", "  a", "   a", "a ", "a  ", "a   ", " a ", "  a  ", "\ta", "a\t", "\na", "a\n",
    "word  word   word    word", "trailing spaces   ", "   leading spaces", " \t\n\r\x0b\x0c",
    "a\x0bb\x0cc", "x\u00a0y", "x\u00a0\u00a0y", " \u00a0 ", "x\u3000y", "x\u2028y",
    "x\u2029y", "x\x85y", "x\u2003\u2003y", "x\u202fy", "x\u205fy", "x\u1680y",
    "x\u200by", "x\u200b\u200by", "x\u180ey", "x\ufeffy", "x\x1cy\x1dz\x1ew\x1fv",
    "\x1c\x1c", " \x1c", "x \u00a0 y", "  !", " !", "!  ", "  1", " 1 ", "1  2",
    "end with newline and spaces\n   ", "\n\n\nthree newlines first", "  \n\n  \n",
    "\t\n\t\n", "tab\tseparated\tvalues\t1\t2", "a" + " " * 100 + "b", "\n" * 50,
]

ACCENTS = [
    "caf\u00e9", "na\u00efve", "r\u00e9sum\u00e9", "cafe\u0301 (combining acute)",
    "Cr\u00e8me br\u00fbl\u00e9e", "Stra\u00dfe Gr\u00f6\u00dfe \u00c4pfel \u00dcbel",
    "\u0141\u00f3d\u017a Gda\u0144sk \u017b\u00f3\u0142w", "Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u",
    "\u0130stanbul \u0131\u015f\u0131k \u00e7\u00f6\u011f\u00fc\u015f", "Espa\u00f1a \u00bfQu\u00e9? \u00a1S\u00ed!",
    "S\u00e3o Paulo, a\u00e7\u00e3o, cora\u00e7\u00e3o", "\u00c5ngstr\u00f6m \u00c6sir \u00d8resund",
    "fran\u00e7ais \u0153uvre \u00e6sthetic", "\u010desk\u00fd \u0159\u00edzek \u016fl",
    "Dvo\u0159\u00e1k, Jan\u00e1\u010dek, Sm\u011btana", "M\u0101ori t\u0113n\u0101 koe",
    "\u00e0\u00e1\u00e2\u00e3\u00e4\u00e5\u00e8\u00e9\u00ea\u00eb\u00ec\u00ed\u00ee\u00ef",
    "A\u030a e\u0308 n\u0303 o\u0302 u\u0300", "e\u0301\u0301\u0301 stacked marks",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334",
    "\u00c9COLE \u00e9cole", "fa\u00e7ade d\u00e9j\u00e0 vu", "\u00fe\u00f0 \u00de\u00d0",
    "\u0111\u0110 \u0127\u0126 \u0142\u0141", "\u01c4\u01c5\u01c6 titlecase digraphs",
    "\ufb01nance \ufb02ow (ligatures)", "\u1e9e\u00df", "\u0149", "\u00aa\u00ba",
    "\u00ad soft hyphen", "\u02bcokina and \u02bb",
]

CJK = [
    "\u4f60\u597d\u4e16\u754c", "\u4e2d\u6587\u5206\u8bcd\u6d4b\u8bd5",
    "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8\u3002", "\u6f22\u5b57\u3068\u3072\u3089\u304c\u306a\u3068\u30ab\u30bf\u30ab\u30ca",
    "\u3053\u3093\u306b\u3061\u306f\u3001\u4e16\u754c\uff01", "\u6771\u4eac\u30bf\u30ef\u30fc333m",
    "\u30b3\u30f3\u30d4\u30e5\u30fc\u30bf\u30fc", "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341",
    "\u9f8d\u9f98\u9f49", "\u3000\u5168\u89d2\u7a7a\u767d", "\uff21\uff22\uff23\uff41\uff42\uff43",
    "\uff08\u62ec\u5f27\uff09\u300c\u5f15\u7528\u300d\u3010\u6ce8\u3011", "Hello\u4e16\u754cWorld",
    "\u65e5\u672c\u8a9e English \ud55c\uad6d\uc5b4 \u4e2d\u6587", "\u3042" * 30,
    "\u70b9\u51fb\u8fd9\u91cc\u67e5\u770b\u66f4\u591a\u4fe1\u606f", "\u7e41\u9ad4\u4e2d\u6587\u8207\u7c21\u4f53\u4e2d\u6587",
    "\u3072\u3089\u304c\u306a\u3000\u30ab\u30bf\u30ab\u30ca\u3000\u6f22\u5b57", "\u4e2d\u6587123\u6570\u5b57",
    "\u5b57\u3002\u5b57\uff0c\u5b57\uff1f", "\u30fc\u30fc\u30fc", "\u3007\u3005\u3006",
    "\u20000\u20001 (ext B)", "\U00020000\U0002a6d6", "\u3131\u314f\u3134\u3153",
    "\ud7a3\uac00", "\u1100\u1161\u11a8 (conjoining jamo)", "\u4e28\u4e36\u4e3f",
]

EMOJI = [
    "\U0001f600", "\U0001f600\U0001f601\U0001f602", "I \u2764\ufe0f NY", "\U0001f44d\U0001f3fd",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466", "\U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5",
    "\U0001f3f3\ufe0f\u200d\U0001f308", "1\ufe0f\u20e3 #\ufe0f\u20e3", "\U0001f9d1\u200d\U0001f4bb",
    "\u2600\ufe0f\u2601\ufe0f\u2602\ufe0f", "\U0001f525\U0001f525\U0001f525 lit",
    "emoji\U0001f680in\U0001f30ewords", " \U0001f600 ", "\U0001f600" * 20, "\u263a\u263b\u2639",
    "\u2705 done \u274c failed \u26a0\ufe0f warning", "\U0001f926\U0001f3fb\u200d\u2642\ufe0f",
    "\U0001f408\u200d\u2b1b", "\U0001f9ec\U0001f9ea\U0001f52c", "\u2660\u2663\u2665\u2666",
    "\u2728\U0001f389\U0001f38a", "\U0001f004\U0001f0cf", "\U0001f170\ufe0f\U0001f171\ufe0f",
    "(\u256f\u00b0\u25a1\u00b0)\u256f\ufe35 \u253b\u2501\u253b", "\u00af\\_(\u30c4)_/\u00af",
    "\U0001f600\U0001f600 \U0001f600", "a\U0001f600b", "\U0001f469\U0001f3fe\u200d\U0001f680",
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f", "\u2b50\ufe0f\u2b50",
]

SCRIPTS = [
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!", "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439\u0442\u0435",
    "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5", "\u03b1\u03b2\u03b3\u03b4\u03b5 \u0394\u03a3\u03a9",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 123",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "\u05e2\u05b4\u05d1\u05b0\u05e8\u05b4\u05d9\u05ea",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e", "\u0939\u093f\u0928\u094d\u0926\u0940",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01", "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",
    "\u0532\u0561\u0580\u0565\u0582", "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd", "\u1230\u120b\u121d",
    "\u0da2\u0dba\u0dbb\u0dd3", "\u0f56\u0f7c\u0f51\u0f0b\u0f66\u0f90\u0f51", "\u1019\u103c\u1014\u103a\u1019\u102c",
    "\u0cb8\u0ccd\u0cb5\u0cbe\u0c97\u0ca4", "\u1780\u1798\u17d2\u1796\u17bb\u1787\u17b6",
    "\u2200x\u2208\u211d: x\u00b2 \u2265 0", "\u222b\u2080\u00b9 f(x) dx \u2248 \u2211 \u220f \u221a\u221e",
    "\u2190\u2191\u2192\u2193\u2194 \u21d2 \u21d4", "\u00a9 \u00ae \u2122 \u00a7 \u00b6 \u2020 \u2021",
    "\u20ac \u00a3 \u00a5 \u20b9 \u20bd \u20a9 \u20bf", "\u2500\u2502\u250c\u2510\u2514\u2518\u253c\u2588\u2591",
    "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522", "\U00010348\U00010330\U00010331",
    "\u16a0\u16a2\u16a6\u16a8\u16b1", "\u2800\u2801\u2803 braille",
]

SPECIAL = [
    EOT, "a" + EOT + "b", " " + EOT + " ", EOT + EOT, EOT + "\n" + EOT, "<|endoftext", "endoftext|>",
    "<|endoftext|", "<<|endoftext|>>", "Hello." + EOT + "Next document.", "\n\n" + EOT + "\n\n",
    "<|startoftext|>", "<|", "|>", "<|endoftext|>\u4f60\u597d",
]

# Tokens that end inside a character: the characters whose UTF-8 no single token holds.
BYTE_BOUNDARY = [
    "\U0001f9a9", "\U0001f9a9\U0001f9a9", "x\U0001f9a9y", "\u9f98", "\u9f98\u9f98", "\U00020bb7",
    "\u0f68\u0fb5", "\u2c6f\u2c6d", "\ua66e", "\U0001d11e", "\U0001f0a1\U0001f0b1",
    "\u1e9b\u0323", "\u0d4e", "\u16c3\u16c7", "\u2e3a\u2e3b", "\U0001f62c\U0001f910",
    "\ufdfd", "\u0bf5\u0bf8", "\ua9c1\ua9c2", "\U00010480\U00010481",
]

ASCII = [chr(c) for c in range(128)] + ["x" + chr(c) + "y" for c in range(0, 128, 3)]

LONG = [
    "a" * 1000, "ab" * 1500, "abc" * 700, "1234567890" * 150, "!" * 500, "-" * 400 + ">",
    " " * 1000, "\n" * 300, "\U0001f600" * 300, "\u4e2d" * 400,
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 40,
]


def random_strings(rng):
    pools = [
        "abcdefghijklmnopqrstuvwxyz",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789",
        " " * 6 + "\t\n\r",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        "\u00e0\u00e9\u00ee\u00f5\u00fc\u00e7\u00f1\u00df\u0153\u0142",
        "".join(chr(c) for c in range(0x4E00, 0x4E40)),
        "".join(chr(c) for c in range(0x3041, 0x3090)),
        "".join(chr(c) for c in range(0x0410, 0x0450)),
        "".join(chr(c) for c in range(0x0391, 0x03AA) if c != 0x03A2),
        "\U0001f600\U0001f680\U0001f44d\U0001f3fd\u2764\ufe0f\u200d\U0001f525",
        "\u00a0\u3000\u2028\x85\u200b\x1c",
        "'sdmtlrve",
    ]
    out = []
    for _ in range(230):
        n = rng.randint(1, 60)
        chosen = rng.sample(pools, rng.randint(1, 4))
        out.append("".join(rng.choice(rng.choice(chosen)) for _ in range(n)))
    words = ["the", "The", " of", "and", "'s", "'ll", "don't", "1999", "3.5", "\u00e9t\u00e9", "\u4e16\u754c",
             "\U0001f600", "  ", "\n", "\t", "!!", "foo_bar", "x=1;", " ", "\u00a0"]
    for _ in range(120):
        out.append("".join(rng.choice(words) for _ in range(rng.randint(1, 25))))
    # Random BMP letters and numbers of scripts assigned since Unicode 1.1-3.0.
    ranges = [(0x00C0, 0x024F), (0x0370, 0x03FF), (0x0400, 0x04FF), (0x0590, 0x05FF),
              (0x0600, 0x06FF), (0x0900, 0x097F), (0x0E00, 0x0E7F), (0x1100, 0x11FF),
              (0x2000, 0x206F), (0x2100, 0x21FF), (0x2500, 0x257F), (0x3000, 0x303F),
              (0x4E00, 0x9FA5), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF)]
    for _ in range(60):
        s = []
        for _ in range(rng.randint(1, 30)):
            lo, hi = rng.choice(ranges)
            s.append(chr(rng.randint(lo, hi)))
        out.append("".join(s))
    return out


def strings():
    rng = random.Random(20261201)
    all_strings = ([""] + ENGLISH + CODE + NUMBERS + CONTRACTIONS + WHITESPACE + ACCENTS + CJK +
                   EMOJI + SCRIPTS + SPECIAL + BYTE_BOUNDARY + ASCII + LONG + random_strings(rng))
    seen, unique = set(), []
    for s in all_strings:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


# ---------------------------------------------------------------- the tokenizers

class References:
    def __init__(self, vocab_dir):
        vocab_dir = Path(vocab_dir)
        self.hf = GPT2Tokenizer.from_pretrained(str(vocab_dir))
        vocab = json.loads((vocab_dir / "vocab.json").read_text(encoding="utf-8"))
        self.vocab_size = len(vocab)
        ranks = data_gym_to_mergeable_bpe_ranks(str(vocab_dir / "merges.txt"),
                                                str(vocab_dir / "vocab.json"))
        specials = {EOT: vocab[EOT]} if EOT in vocab else {}
        self.eot = specials.get(EOT)
        self.tt = tiktoken.Encoding("gpt2-files", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                                    special_tokens=specials)
        self.files = {"vocab.json": sha256(vocab_dir / "vocab.json"),
                      "merges.txt": sha256(vocab_dir / "merges.txt")}

    def encode(self, s):
        hf = self.hf.encode(s) if self.eot is not None else self.hf.encode(
            s, split_special_tokens=True)
        tt = self.tt.encode(s, allowed_special="all")
        if hf != tt:
            raise SystemExit(f"transformers and tiktoken disagree on {s!r}: {hf} vs {tt}")
        return hf

    def encode_ordinary(self, s):
        hf = self.hf.encode(s, split_special_tokens=True)
        tt = self.tt.encode_ordinary(s)
        if hf != tt:
            raise SystemExit(f"transformers and tiktoken disagree on {s!r} (ordinary): {hf} vs {tt}")
        return hf

    def decode(self, ids):
        hf = self.hf.decode(ids)
        tt = self.tt.decode(ids, errors="replace")
        if hf != tt:
            raise SystemExit(f"transformers and tiktoken decode {ids} differently: {hf!r} vs {tt!r}")
        return hf


def partial_character_ids(refs):
    """Ids of tokens whose bytes are not whole UTF-8 characters."""
    out = []
    for i in range(refs.vocab_size):
        if i == refs.eot:
            continue
        try:
            refs.tt.decode_single_token_bytes(i).decode("utf-8")
        except UnicodeDecodeError:
            out.append(i)
    return out


def make_cases(refs, texts, decode_count, seed):
    cases = []
    for s in texts:
        ids = refs.encode(s)
        if refs.decode(ids) != s:
            raise SystemExit(f"decode(encode({s!r})) != the text")
        case = {"text": s, "ids": ids}
        ordinary = refs.encode_ordinary(s)
        if ordinary != ids:
            case["ordinary_ids"] = ordinary
        cases.append(case)
    rng = random.Random(seed)
    partial = partial_character_ids(refs)
    decodes = []
    for k in range(decode_count):
        n = rng.randint(1, 12)
        ids = [rng.choice(partial) if rng.random() < 0.6 else rng.randrange(refs.vocab_size)
               for _ in range(n)]
        if k % 5 == 0:
            ids = [rng.choice(partial) for _ in range(n)]
        decodes.append({"ids": ids, "text": refs.decode(ids)})
    return cases, decodes


def document(refs, cases, decodes, vocab_note):
    return {
        "made_by": "tests/text/make_gpt2_cases.py",
        "reference": {
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "tiktoken": tiktoken.__version__,
            "python": sys.version.split()[0],
            "encode": "transformers.GPT2Tokenizer.from_pretrained(dir).encode(text), equal to "
                      "tiktoken's encode(text, allowed_special='all'); ordinary_ids (where they "
                      "differ): encode(text, split_special_tokens=True), equal to tiktoken's "
                      "encode_ordinary",
            "decode": "transformers' decode(ids), equal to tiktoken's decode(ids, errors='replace')",
        },
        "vocabulary": vocab_note,
        "files_sha256": refs.files,
        "vocab_size": refs.vocab_size,
        "end_of_text": refs.eot,
        "cases": cases,
        "decode_cases": decodes,
    }


def write_truncated_vocab(vocab_dir, out_dir, size):
    vocab = json.loads((Path(vocab_dir) / "vocab.json").read_text(encoding="utf-8"))
    lines = (Path(vocab_dir) / "merges.txt").read_text(encoding="utf-8").split("\n")
    merges = [m for m in lines[1:] if m][: size - 256]
    by_id = sorted(((i, t) for t, i in vocab.items() if i < size))
    if [i for i, _ in by_id] != list(range(size)):
        raise SystemExit("the vocabulary's first ids are not 0..size-1")
    inverse = dict((i, t) for i, t in by_id)
    for k, m in enumerate(merges):
        if m.replace(" ", "") != inverse[256 + k]:
            raise SystemExit(f"merge {k} ({m!r}) does not make token {256 + k}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "vocab.json").write_text(
        json.dumps(dict((t, i) for i, t in by_id), ensure_ascii=False, separators=(",", ":")),
        encoding="utf-8")
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n",
                                        encoding="utf-8")


def dumps(doc):
    return json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--vocab-dir", default=os.environ.get("FUSEDSL_GPT2_VOCAB_DIR"),
                    help="holds GPT-2's vocab.json and merges.txt (default: $FUSEDSL_GPT2_VOCAB_DIR)")
    ap.add_argument("--out", default=str(DATA), help="output folder (default: %(default)s)")
    ap.add_argument("mode", choices=["write", "check"])
    args = ap.parse_args()
    if not args.vocab_dir:
        ap.error("give --vocab-dir or set FUSEDSL_GPT2_VOCAB_DIR")
    out = Path(args.out)

    texts = strings()
    refs = References(args.vocab_dir)
    cases, decodes = make_cases(refs, texts, 150, 1)
    full = dumps(document(refs, cases, decodes,
                          "GPT-2's vocab.json and merges.txt (50257 tokens, 50000 merges), as the "
                          "PyPI package openai-whisper==20230124 ships them in "
                          "whisper/assets/gpt2/"))

    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        small_dir = Path(tmp) / "gpt2_512"
        write_truncated_vocab(args.vocab_dir, small_dir, 512)
        small_refs = References(small_dir)
        small_cases, small_decodes = make_cases(
            small_refs, [t for t in texts if len(t.encode("utf-8")) <= 400], 60, 2)
        small = dumps(document(small_refs, small_cases, small_decodes,
                               "GPT-2's vocabulary cut to ids 0..511: the 256 bytes and the first "
                               "256 merges (data/gpt2_512/), without <|endoftext|>"))
        outputs = {"gpt2_cases.json": full, "gpt2_512_cases.json": small,
                   "gpt2_512/vocab.json": (small_dir / "vocab.json").read_text(encoding="utf-8"),
                   "gpt2_512/merges.txt": (small_dir / "merges.txt").read_text(encoding="utf-8")}

    if args.mode == "write":
        for name, text in outputs.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(text, encoding="utf-8")
        print(f"wrote {len(cases)} + {len(small_cases)} cases, {len(decodes)} + "
              f"{len(small_decodes)} decode cases to {out}")
        return 0
    stale = [n for n, text in outputs.items()
             if not (out / n).exists() or (out / n).read_text(encoding="utf-8") != text]
    if stale:
        print("make_gpt2_cases: these files differ from what the reference tokenizers give now: " +
              ", ".join(stale), file=sys.stderr)
        return 1
    print(f"make_gpt2_cases: {len(cases)} + {len(small_cases)} cases reproduce")
    return 0


if __name__ == "__main__":
    sys.exit(main())
