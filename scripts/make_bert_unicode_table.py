#!/usr/bin/env python3
"""Writes include/fusedsl/text/bert_unicode_table.hpp: the code points where Hugging Face
tokenizers' BERT normalizer and pre-tokenizer classify a character differently from the Unicode
data of the utf8proc library that fusedsl's tokenizer reads.

tokenizers takes its general categories from the Rust crate unicode_categories, whose tables
predate Unicode 9 (U+08E2, a Cf added in 9.0, is not a control character to it), while utf8proc
2.8 has Unicode 15. So a few hundred code points assigned or re-categorised since then (new
combining marks, punctuation and format characters) are, to the reference tokenizer, not what
utf8proc says. fusedsl's tokenizer matches the reference by flipping its utf8proc answer on these
code points; everything else comes from utf8proc.

For every code point this script asks tokenizers (the installed version, via its Python bindings)
and utf8proc (through ctypes, the shared library fusedsl links) each question the tokenizer
asks: control character? whitespace? nonspacing mark? punctuation? CJK ideograph? canonical
decomposition? lowercase? It writes the disagreements. Run it in the model venv
(scripts/setup-model-venv):

    .venv-models/bin/python scripts/make_bert_unicode_table.py > include/fusedsl/text/bert_unicode_table.hpp
"""
import ctypes
import ctypes.util
import string
import sys

import tokenizers
from tokenizers import normalizers, pre_tokenizers

lib = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so.2")
lib.utf8proc_category.restype = ctypes.c_int
lib.utf8proc_category.argtypes = [ctypes.c_int32]
lib.utf8proc_tolower.restype = ctypes.c_int32
lib.utf8proc_tolower.argtypes = [ctypes.c_int32]
lib.utf8proc_unicode_version.restype = ctypes.c_char_p
lib.utf8proc_version.restype = ctypes.c_char_p
lib.utf8proc_decompose_char.restype = ctypes.c_ssize_t
lib.utf8proc_decompose_char.argtypes = [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), ctypes.c_ssize_t,
                                        ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
UTF8PROC_DECOMPOSE = 1 << 4
MN, PC, PO, CC, CF, CO = 6, 12, 18, 26, 27, 29  # utf8proc_category_t

# The CJK blocks BERT pads with spaces (tokenizers' is_chinese_char; the same list is in
# include/fusedsl/text/bert_unicode.hpp). 0x2B920, not Extension E's 0x2B820: tokenizers' value.
CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
       (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def u_nfd(cp):
    buf = (ctypes.c_int32 * 8)()
    n = lib.utf8proc_decompose_char(cp, buf, 8, UTF8PROC_DECOMPOSE, None)
    assert 0 < n <= 8, (hex(cp), n)
    return "".join(chr(buf[i]) for i in range(n))


def u_lower(cp):
    return "i\u0307" if cp == 0x130 else chr(lib.utf8proc_tolower(cp))


# Unicode's White_Space, as include/fusedsl/text/unicode.hpp lists it.
WHITE_SPACE = {*range(0x9, 0xE), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
               0x202F, 0x205F, 0x3000}


def u_white_space(cp):
    return cp in WHITE_SPACE


def main():
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                                       lowercase=False)
    strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                                       lowercase=False)
    chinese = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False,
                                         lowercase=False)
    nfd, lower = normalizers.NFD(), normalizers.Lowercase()
    pre = pre_tokenizers.BertPreTokenizer()

    flips = {k: [] for k in ("control", "white_space", "nonspacing_mark", "punctuation")}
    nfd_map, lower_map = {}, {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        cat = lib.utf8proc_category(cp)
        cleaned = clean.normalize_str(c)
        hf_control = cleaned == "" and cp != 0xFFFD  # U+FFFD is So, dropped by name
        u_control = cat in (CC, CF, CO) and c not in "\t\n\r"
        if hf_control != u_control:
            flips["control"].append(cp)
        pieces = [p for p, _ in pre.pre_tokenize_str("a" + c + "b")]
        hf_ws = pieces == ["a", "b"]
        if hf_ws != u_white_space(cp):
            flips["white_space"].append(cp)
        # The normalizer's whitespace test is the pre-tokenizer's (Rust's char::is_whitespace).
        if (cleaned == " ") != (hf_ws and not hf_control and cp != 0):
            sys.exit(f"the normalizer's whitespace differs from the pre-tokenizer's at U+{cp:04X}")
        hf_nfd = nfd.normalize_str(c)
        if hf_nfd != u_nfd(cp):
            nfd_map[cp] = hf_nfd
        if hf_nfd == c:  # only characters NFD leaves alone meet the mark filter
            if (strip.normalize_str(c) == "") != (cat == MN):
                flips["nonspacing_mark"].append(cp)
        hf_punct = pieces == ["a", c, "b"]
        u_punct = PC <= cat <= PO or c in string.punctuation
        if hf_punct != u_punct:
            flips["punctuation"].append(cp)
        hf_lower = lower.normalize_str(c)
        if hf_lower != u_lower(cp):
            lower_map[cp] = hf_lower
        hf_cjk = chinese.normalize_str(c) == " " + c + " "
        if hf_cjk != any(a <= cp <= b for a, b in CJK):
            sys.exit(f"CJK ranges disagree with tokenizers at U+{cp:04X}")

    out = sys.stdout
    out.write("#pragma once\n")
    out.write("// Generated by scripts/make_bert_unicode_table.py from tokenizers %s and utf8proc %s\n"
              % (tokenizers.__version__, lib.utf8proc_version().decode()))
    out.write("// (Unicode %s); do not edit. The code points where Hugging Face tokenizers' BERT\n"
              % lib.utf8proc_unicode_version().decode())
    out.write("// normalizer and pre-tokenizer answer a question about a character differently from\n")
    out.write("// utf8proc (its Unicode tables are older); the script says why.\n")
    out.write("#include <array>\n#include <string_view>\n\n#include \"fusedsl/text/code_point_table.hpp\"\n\n")
    out.write("namespace fusedsl::text::bert_table {\n\n// clang-format off\n")
    out.write('inline constexpr std::string_view utf8proc_unicode_version = "%s";\n'
              % lib.utf8proc_unicode_version().decode())
    out.write('inline constexpr std::string_view tokenizers_version = "%s";\n\n' % tokenizers.__version__)
    for name, cps in flips.items():
        ranges = []
        for cp in cps:
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
        out.write("// %d code points\n" % len(cps))
        out.write("inline constexpr std::array<code_point_range, %d> %s_flips = {{\n" % (len(ranges), name))
        line = "   "
        for a, b in ranges:
            item = " {0x%04X, 0x%04X}," % (a, b)
            if len(line) + len(item) > 100:
                out.write(line + "\n")
                line = "   "
            line += item
        if line.strip():
            out.write(line + "\n")
        out.write("}};\n\n")
    for name, m in (("nfd", nfd_map), ("lowercase", lower_map)):
        out.write("// %s where tokenizers differs from utf8proc: %d code points\n" % (name, len(m)))
        out.write("inline constexpr std::array<code_point_mapping, %d> %s_overrides = {{\n" % (len(m), name))
        for cp, to in sorted(m.items()):
            out.write("    {0x%04X, U\"%s\"},\n" % (cp, "".join("\\U%08X" % ord(ch) for ch in to)))
        out.write("}};\n\n")
    out.write("// clang-format on\n\n}  // namespace fusedsl::text::bert_table\n")


if __name__ == "__main__":
    main()
