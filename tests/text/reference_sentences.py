"""The sentences of the tokenizer and embedding references (tests/text/make_wordpiece_reference.py,
tests/models/make_minilm_reference.py): a fixed, varied list of byte strings, the same on every run.

sentences() returns (group, bytes) pairs. Most are UTF-8; the "invalid_utf8" group is not.
write_jsonl() writes them with their token ids in the form tests/text/reference_file.hpp reads.
"""
import json
import random

ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "Sentence embeddings map text to a vector space where similar meanings lie close together.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Call me Ishmael. Some years ago, never mind how long precisely, I thought I would sail about.",
    "In the beginning the Universe was created. This has made a lot of people very angry.",
    "She sells sea shells by the sea shore.",
    "How much wood would a woodchuck chuck if a woodchuck could chuck wood?",
    "The committee's decision, announced on Tuesday, surprised almost everyone.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Please don't forget to bring your umbrella; it's going to rain later.",
    "Unbelievably, the uncharacteristically disorganized organization reorganized itself.",
    "Antidisestablishmentarianism is often cited as one of the longest English words.",
    "The mitochondria is the powerhouse of the cell.",
    "Whales are mammals, not fish, although they live in the ocean.",
    "My flight departs at 6:45 a.m. from gate B12, terminal 3.",
    "He said, \"I'll be there by noon,\" but he arrived at three.",
    "Transformers use self-attention to weigh the importance of each token in a sequence.",
    "What is the capital of Australia? Many people guess Sydney, but it is Canberra.",
    "The stock market fell 3.2% after the central bank raised interest rates.",
    "Neural networks are universal function approximators under mild conditions.",
    "I can't believe it's not butter!",
    "The children played happily in the park until sunset.",
    "According to the report, over 70 percent of respondents preferred remote work.",
    "The recipe calls for two cups of flour, one egg, and a pinch of salt.",
    "Quantum entanglement does not allow faster-than-light communication.",
    "They're going to their friend's house over there.",
    "A journey of a thousand miles begins with a single step.",
    "The Eiffel Tower was completed in 1889 for the World's Fair.",
    "Tokenization splits text into subword units such as word pieces.",
    "Where there's smoke, there's fire.",
    "An apple a day keeps the doctor away.",
    "COVID-19 vaccines were developed in record time.",
    "The U.S.A. and the U.K. signed the agreement in Washington, D.C.",
    "OK, so here's the thing: we need more data, not bigger models.",
    "Mr. and Mrs. Smith live at 221B Baker Street.",
    "THIS SENTENCE IS WRITTEN ENTIRELY IN CAPITAL LETTERS.",
    "tHiS sEnTeNcE hAs AlTeRnAtInG cAsE.",
    "e.g. i.e. etc. vs. approx. dept. univ.",
    "Rock 'n' roll isn't dead; it's just resting.",
    "The cat sat on the mat. The dog sat on the log. The frog sat on the bog.",
    "Semantic search finds documents by meaning rather than by exact keywords.",
]

PUNCTUATION = [
    "Hello, world!",
    "Wait... what?!",
    "(parentheses) [brackets] {braces} <angles>",
    "quotes: \"double\" 'single' `backtick` \u201ccurly\u201d \u2018curly\u2019 \u00abguillemets\u00bb \u201elow\u201c",
    "dashes - \u2013 \u2014 \u2012 \u2015 hyphen-ated en\u2013dash em\u2014dash",
    "!!!???...,,,;;;:::",
    "@#$%^&*()_+-=[]{}|;':\",./<>?~`",
    "ellipsis\u2026 bullet\u2022 middle\u00b7dot section\u00a7 pilcrow\u00b6 dagger\u2020",
    "\u00bfQu\u00e9? \u00a1Ol\u00e9!",
    "a/b\\c|d_e~f^g",
    "\u3002\u3001\uff01\uff1f\u300c\u300d\u300e\u300f\u3010\u3011",
    "\u060c\u061b\u061f Arabic punctuation",
    "price: $5, \u20ac10, \u00a320, \u00a5300, \u20b9100, \u20bf0.5",
    "math: 2+2=4, 3*3=9, 10/2=5, 7-1=6, x^2, a<b>c, \u00b1 \u00d7 \u00f7 \u221a \u221e \u2260 \u2264 \u2265",
    "#hashtag @mention $ticker %percent &ampersand *star",
    "...leading dots and trailing dots...",
    "''''''''\"\"\"\"\"",
    "\u203d interrobang \u2e18 inverted \u2e2e reversed question",
    "\u2e52 \u2e53 \u2e5d newer punctuation from Unicode 13 and 14",
    "a\u2e55b\u2e56c: brackets from Unicode 14",
    "\u0f3a\u0f3b Tibetan brackets \u169b\u169c Ogham feathers",
    "\uff08fullwidth\uff09\uff3bbrackets\uff3d",
    "_under_score_ and __dunder__",
    "--double-dash and ---triple",
    "\u201cNested \u2018quotes\u2019 inside\u201d",
]

NUMBERS = [
    "3.14159265358979323846264338327950288419716939937510",
    "1,234,567.89",
    "1.234.567,89",
    "The year 2024 had 366 days.",
    "Call 555-0123 or +1 (800) 555-0199.",
    "ISBN 978-3-16-148410-0",
    "0x1F600 0b101010 0o755 1e-9 6.022e23",
    "1st 2nd 3rd 4th 21st 22nd 101st",
    "12:30:45.678 2024-02-29T23:59:59Z",
    "\u00bd \u00bc \u00be \u2153 \u215b fractions",
    "\u00b2 \u00b3 \u00b9 \u2074 superscripts \u2080 \u2081 \u2082 subscripts",
    "\u2160 \u2161 \u2162 \u216b Roman numerals \u2170 \u2171",
    "\u2460 \u2461 \u2462 \u2473 circled \u2776 \u2777",
    "\u0660\u0661\u0662\u0663 Arabic-Indic digits \u06f4\u06f5",
    "\u0966\u0967\u0968 Devanagari digits \u0e50\u0e51\u0e52 Thai digits",
    "\uff11\uff12\uff13 fullwidth digits",
    "\U0001d7ce\U0001d7cf\U0001d7d0 mathematical digits",
    "100% 50\u2030 25\u2031",
    "-273.15\u00b0C = 0 K = -459.67\u00b0F",
    "v1.2.3-beta.4+build.567",
    "99 bottles of beer on the wall, 99 bottles of beer.",
    "000000000000000000000000000000",
    "123456789012345678901234567890123456789012345678901234567890",
    "4\u00d74=16 and 2\u207b\u00b9 = 0.5",
    "\u5341\u4e8c\u6708\u4e09\u5341\u4e00\u65e5 is December 31st",
]

EUROPEAN = [
    "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e \u00e0 la fran\u00e7aise.",
    "L'\u00e9t\u00e9 dernier, nous sommes all\u00e9s \u00e0 No\u00ebl chez ma tante.",
    "\u00c0 bient\u00f4t ! \u00c7a va tr\u00e8s bien, merci.",
    "\u0152uvre, c\u0153ur, s\u0153ur, \u00e6quo.",
    "Gr\u00fc\u00dfe aus M\u00fcnchen! Die Stra\u00dfe ist sch\u00f6n.",
    "\u00c4rger, \u00d6l und \u00dcbermut. GROSSE STRASSE \u1e9e.",
    "Donaudampfschifffahrtselektrizit\u00e4tenhauptbetriebswerkbauunterbeamtengesellschaft",
    "\u00bfD\u00f3nde est\u00e1 la estaci\u00f3n? Ma\u00f1ana ser\u00e1 otro d\u00eda.",
    "El ping\u00fcino ag\u00fcero come \u00f1oquis.",
    "A informa\u00e7\u00e3o est\u00e1 dispon\u00edvel em portugu\u00eas; n\u00e3o h\u00e1 d\u00favida.",
    "Perch\u00e9 la citt\u00e0 \u00e8 cos\u00ec bella? Perch\u00e9 s\u00ec.",
    "Za\u017c\u00f3\u0142\u0107 g\u0119\u015bl\u0105 ja\u017a\u0144.",
    "P\u0159\u00edli\u0161 \u017elu\u0165ou\u010dk\u00fd k\u016f\u0148 \u00fap\u011bl \u010f\u00e1belsk\u00e9 \u00f3dy.",
    "\u0130stanbul'da \u0131s\u0131r\u0131k, \u015feker ve \u00e7ay; I\u011fd\u0131r ve \u0130zmir.",
    "Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u: \u0111\u01b0\u1eddng, ph\u1edf, ng\u01b0\u1eddi.",
    "\u00de\u00f3r\u00f0ur \u00e1 \u00cdslandi bor\u00f0a\u00f0i har\u00f0fiskur.",
    "\u0218tiin\u021b\u0103 \u0219i \u021bar\u0103 \u00een Rom\u00e2nia.",
    "\u00c1rv\u00edzt\u0171r\u0151 t\u00fck\u00f6rf\u00far\u00f3g\u00e9p.",
    "R\u00e4ksm\u00f6rg\u00e5s och \u00e5l p\u00e5 \u00f6n.",
    "K\u00f8benhavn, \u00c6r\u00f8, bl\u00e5b\u00e6rsyltet\u00f8j.",
    "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5! \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u03bc\u03b5 \u03c4\u03cc\u03bd\u03bf\u03c5\u03c2.",
    "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u03bf\u03b4\u03c5\u03c3\u03c3\u03b5\u03cd\u03c2 \u03c3\u03bf\u03c6\u03cc\u03c2",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0401\u043b\u043a\u0430 \u0438 \u0435\u0436.",
    "\u0421\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 \u0444\u0440\u0430\u043d\u0446\u0443\u0437\u0441\u043a\u0438\u0445 \u0431\u0443\u043b\u043e\u043a.",
    "\u0423\u043a\u0440\u0430\u0457\u043d\u0441\u044c\u043a\u0430 \u043c\u043e\u0432\u0430: \u0491\u0430\u043d\u043e\u043a, \u0457\u0436\u0430\u043a, \u0454\u043d\u043e\u0442.",
    "\u0421\u0440\u043f\u0441\u043a\u0438: \u0459\u0443\u0431\u0430\u0432, \u045a\u0435\u0433\u043e\u0432, \u0452\u0430\u043a; Srpski: \u0111ak, \u010du\u0107.",
    "Lietuvi\u0173 kalba: \u0105\u010d\u0119\u0117\u012f\u0161\u0173\u016b\u017e.",
    "Latvie\u0161u: \u0101\u010d\u0113\u0123\u012b\u0137\u013c\u0146\u0161\u016b\u017e.",
    "Eesti: \u00f5un, \u00e4\u00e4r, \u00f6\u00f6, \u00fcks.",
    "Malti: \u010bikkulata, \u0121ar, \u0127obs, \u017cejt.",
    "Cymraeg: \u0175 \u0177 \u00e2 \u00ea.",
    "Na\u00efve co\u00f6perate r\u00e9sum\u00e9 fa\u00e7ade d\u00e9j\u00e0 vu.",
    "Decomposed: e\u0301 a\u0300 o\u0308 n\u0303 c\u0327 vs precomposed: \u00e9 \u00e0 \u00f6 \u00f1 \u00e7",
    "Stacked marks: a\u0301\u0302\u0303\u0304 o\u0323\u031b\u0301 x\u0334\u0335\u0336",
    "Zalgo: H\u0335\u0352\u034c\u0359e\u0334\u0350\u031c\u0324 \u0338\u0313\u0316c\u0337\u0346\u0323o\u0335\u0311m\u0334\u0307e\u0335\u035d\u0331s",
    "\u1e9b\u0323 \u1e69 \u01c4 \u01c5 \u01c6 \u01f1 digraphs",
    "\u00df \u1e9e \u0130 \u0131 \u03c2 \u03a3 \u03c3 case edge cases",
    "\u10a0\u10a1 Georgian Asomtavruli \u1c90\u1c91 Mtavruli \u10d0\u10d1 Mkhedruli",
    "\u13a0\u13a1\u13a2 Cherokee \uab70\uab71 small Cherokee",
    "\u0531\u0562\u0563 \u0540\u0561\u0575\u0565\u0580\u0565\u0576 Armenian",
]

CJK = [
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002",
    "\u6211\u559c\u6b22\u5b66\u4e60\u673a\u5668\u5b66\u4e60\u548c\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002",
    "\u5317\u4eac\u662f\u4e2d\u534e\u4eba\u6c11\u5171\u548c\u56fd\u7684\u9996\u90fd\u3002",
    "\u7e41\u9ad4\u4e2d\u6587\uff1a\u81fa\u7063\u7684\u6a5f\u5834\u5f88\u5927\u3002",
    "\u9f8d\u9f98\u9f49 rare hanzi \u9fa5 \u9fcb \u9fef \u9ffc",
    "\u3400\u3401\u4db5 Extension A, \U00020000\U00020001 Extension B, \U0002a700 C, \U0002b740 D",
    "\U0002b820 \U0002b8ff \U0002b920 \U0002ceaf Extension E around tokenizers' range start",
    "\U00030000 \U00031350 Extension G is not in BERT's CJK ranges",
    "\uf900\uf901\ufa0e\ufa6e CJK compatibility ideographs \U0002f800",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002",
    "\u3053\u3093\u306b\u3061\u306f\u3001\u4e16\u754c\uff01",
    "\u79c1\u306f\u5bff\u53f8\u304c\u5927\u597d\u304d\u3067\u3059\u3002\u30e9\u30fc\u30e1\u30f3\u3082\u597d\u304d\u3002",
    "\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3068\u6f22\u5b57\u3002\uff8a\uff9d\uff76\uff78\uff76\uff85",
    "\u304c\u304e\u3050\u3052\u3054 \u3071\u3074\u3077\u307a\u307d dakuten \u304b\u3099 combining",
    "\u6771\u4eac\u90fd\u6e0b\u8c37\u533a\u3067\u4f1a\u3044\u307e\u3057\u3087\u3046\u3002",
    "\uc548\ub155\ud558\uc138\uc694",
    "\ub300\ud55c\ubbfc\uad6d\uc758 \uc218\ub3c4\ub294 \uc11c\uc6b8\uc785\ub2c8\ub2e4.",
    "\ud55c\uad6d\uc5b4 \ud615\ud0dc\uc18c \ubd84\uc11d\uc740 \uc5b4\ub835\uc2b5\ub2c8\ub2e4.",
    "\u1100\u1161\u11a8 conjoining jamo \u3131\u314f compatibility jamo",
    "\u4e2d\u6587English\u6df7\u5408mixed\u6587\u672ctext",
    "\u6f22\u5b57\u304b\u306a\u4ea4\u3058\u308a\u6587\u3068 Hangul \ud55c\uae00",
    "\u3000\u5168\u89d2\u30b9\u30da\u30fc\u30b9\u3000\u3067\u533a\u5207\u308b\u3000",
    "\uff21\uff22\uff23\uff44\uff45\uff46 fullwidth Latin",
    "\u3231\u3239\u32a3 \u337b\u337c\u337d \u3300 enclosed and squared CJK",
    "\u2f00\u2f01\u2f02 Kangxi radicals \u2e80\u2e81 supplement",
    "\u5f20\u4e09\u674e\u56db\u738b\u4e94\u8d75\u516d",
    "\u6625\u7720\u4e0d\u89ba\u6681\uff0c\u8655\u8655\u805e\u557c\u9ce5\u3002",
    "\u5b66\u800c\u65f6\u4e60\u4e4b\uff0c\u4e0d\u4ea6\u8bf4\u4e4e\uff1f",
]

OTHER_SCRIPTS = [
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0627\u0644\u0644\u0651\u064e\u0647\u064f \u0623\u064e\u0643\u0652\u0628\u064e\u0631\u064f with harakat",
    "\u0634\u0643\u0631\u0627\u064b \u062c\u0632\u064a\u0644\u0627\u064b\u061f",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u05d1\u05b0\u05bc\u05e8\u05b5\u05d0\u05e9\u05b4\u05c1\u05d9\u05ea with niqqud",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e \u092e\u0947\u0902 \u0905\u0928\u0941\u0938\u094d\u0935\u093e\u0930 \u0914\u0930 \u0935\u093f\u0938\u0930\u094d\u0917\u0903",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
    "\u0e01\u0e34\u0e19\u0e02\u0e49\u0e32\u0e27\u0e2b\u0e23\u0e37\u0e2d\u0e22\u0e31\u0e07",
    "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0 Georgian",
    "\u1230\u120b\u121d \u12a0\u1208\u121d Amharic",
    "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd \u0bae\u0bca\u0bb4\u0bbf Tamil",
    "\u09ac\u09be\u0982\u09b2\u09be \u09ad\u09be\u09b7\u09be Bengali",
    "\u0c24\u0c46\u0c32\u0c41\u0c17\u0c41 Telugu \u0c95\u0ca8\u0ccd\u0ca8\u0ca1 Kannada",
    "\u0d2e\u0d32\u0d2f\u0d3e\u0d33\u0d02 Malayalam \u0a2a\u0a70\u0a1c\u0a3e\u0a2c\u0a40 Punjabi",
    "\u1781\u17d2\u1798\u17c2\u179a Khmer \u0ea5\u0eb2\u0ea7 Lao",
    "\u1019\u103c\u1014\u103a\u1019\u102c Burmese \u0f56\u0f7c\u0f51\u0f0b Tibetan",
    "\u0dc3\u0dd2\u0d82\u0dc4\u0dbd Sinhala \u0a97\u0ac1\u0a9c\u0ab0\u0abe\u0aa4\u0ac0 Gujarati",
    "\u13e3\u13b3\u13a9 Cherokee syllabary \u1403\u14c4\u1483 Canadian syllabics",
    "\u16a0\u16a2\u16a6\u16a8\u16b1\u16b2 runes \u1680Ogham\u1680space",
    "\ua000\ua001 Yi \u1820\u1821 Mongolian \u180e vowel separator",
    "\U00010330\U00010331 Gothic \U00013000\U00013001 hieroglyphs \U00012000 cuneiform",
    "\U00013430\U00013431 Egyptian format controls, Unicode 12",
    "\u0890\u0891 Arabic pound and piastre marks above, Unicode 14 Cf",
    "\u08e2 Arabic disputed end of ayah (Unicode 9 Cf) and \u08ca\u08cb marks (Unicode 14 Mn)",
    "a\u0898b\u1ac1c\u1dfa new combining marks",
    "\U00011938 Dives Akuru vowel sign o, \U00011935\U00011930 its pieces",
    "\u1c89 \u1c8a Cyrillic TJE, Unicode 16 case pair \ua7cb \ua7cc \ua7dc",
    "\U000111c9 Sharada sandhi mark, \u1734 Hanunoo pamudpod, \u166d Canadian chi sign",
    "\u0d4f \u0e4f \u17d4 \u1aa0 \u0f14 various Po",
]

EMOJI = [
    "I love pizza \U0001f355 and tacos \U0001f32e!",
    "\U0001f600\U0001f601\U0001f602\U0001f923\U0001f603",
    "\U0001f970 \U0001fae0 \U0001f97a newer emoji",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family ZWJ sequence",
    "\U0001f44d\U0001f3fb \U0001f44d\U0001f3fd \U0001f44d\U0001f3ff skin tones",
    "\U0001f1fa\U0001f1f8 \U0001f1ef\U0001f1f5 \U0001f1e9\U0001f1ea flags",
    "1\ufe0f\u20e3 #\ufe0f\u20e3 *\ufe0f\u20e3 keycaps",
    "\u2764\ufe0f \u2764 \u2665 \u2661 hearts with and without VS16",
    "\U0001f3f3\ufe0f\u200d\U0001f308 rainbow flag \U0001f3f4\u200d\u2620\ufe0f pirate",
    "\U0001f9d1\u200d\U0001f4bb coder \U0001f469\U0001f3fe\u200d\U0001f680 astronaut",
    "weather: \u2600\ufe0f \u2601 \u2602 \u2603 \u2604 \u26a1 \u2744",
    "\u263a smiling \u2639 frowning \u2620 skull",
    "\U0001f4a9\U0001f4a9\U0001f4a9",
    "The meeting is at 3pm \u23f0 in room 4 \U0001f3e2.",
    "Great job!!! \U0001f389\U0001f389\U0001f389 \U0001f44f\U0001f44f",
    "\U0001f1ec\U0001f1e7 \U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f tag sequence",
    "emoji\U0001f600glued\U0001f600to\U0001f600words",
    "\u00a9 \u00ae \u2122 \u2120 symbols",
    "\u265a\u265b\u265c chess \u2660\u2663\u2665\u2666 cards \U0001f0a1 playing card",
    "\u2190\u2191\u2192\u2193 arrows \u21d2 \u21d4 \u27a1",
]

URLS = [
    "https://www.example.com/path/to/page?query=string&foo=bar#section",
    "Visit http://example.org or https://sub.domain.co.uk/index.html today.",
    "Email me at first.last+tag@example-mail.com please.",
    "ftp://files.example.net/pub/archive.tar.gz",
    "file:///home/user/documents/report_final_v2.pdf",
    "C:\\Users\\Admin\\AppData\\Local\\Temp\\file.tmp",
    "/usr/local/lib/python3.11/site-packages/numpy/__init__.py",
    "https://en.wikipedia.org/wiki/Caf%C3%A9_au_lait",
    "https://\u4f8b\u3048.\u30c6\u30b9\u30c8/\u30d1\u30b9 internationalized domain",
    "git@github.com:user/repo.git",
    "mailto:someone@example.com?subject=Hello%20World",
    "192.168.1.1:8080 and [2001:db8::1]:443",
    "www.google.com/search?q=sentence+transformers",
    "#MachineLearning #NLP #AI @huggingface",
    "s3://bucket-name/prefix/object.parquet",
    "https://example.com/a-very-long-url-segment-that-goes-on-and-on-and-on-with-many-hyphenated-words",
    "user:password@host:5432/database?sslmode=require",
    "data:text/plain;base64,SGVsbG8sIFdvcmxkIQ==",
    "urn:isbn:0451450523",
    "<a href=\"https://example.com\">link</a>",
]

CODE = [
    "def foo(x): return x ** 2 + 1",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "#include <iostream>\nint main() { std::cout << \"Hello\" << std::endl; }",
    "const f = (a, b) => a?.b ?? b;",
    "SELECT id, name FROM users WHERE age > 30 ORDER BY name DESC;",
    "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "<div class=\"container\"><p>Hello &amp; welcome</p></div>",
    "git commit -m \"fix: handle empty input\" && git push origin main",
    "x = [i**2 for i in range(10) if i % 2 == 0]",
    "fn main() { let v: Vec<u32> = (0..10).collect(); println!(\"{:?}\", v); }",
    "$ sudo apt-get install -y build-essential libssl-dev",
    "template <typename T> constexpr T square(T x) noexcept { return x * x; }",
    "if err != nil { return fmt.Errorf(\"failed: %w\", err) }",
    "\tindented\twith\ttabs\n    and spaces",
    "camelCaseVariable snake_case_variable PascalCaseClass SCREAMING_SNAKE_CASE kebab-case",
    "/* block comment */ // line comment # shell comment -- sql comment",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=1;g>>=2;h&=3;i|=4;j^=5",
    "0xDEADBEEF 0xCAFEBABE 0b1111_0000 1_000_000",
    "regex: ^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
    "printf(\"%d %s %.2f\\n\", n, str, val);",
    "lambda x: x if x > 0 else -x",
    "np.linalg.norm(embeddings, axis=1, keepdims=True)",
    "std::vector<std::pair<int, std::string>> v{{1, \"a\"}, {2, \"b\"}};",
    "@decorator\nclass Foo(Base, metaclass=Meta):\n    pass",
    "<?php echo $var; ?> <%= erb %> {{ jinja }} ${shell}",
]

CONTROL = [
    "tab\tseparated\tvalues",
    "line one\nline two\nline three",
    "windows\r\nline\r\nendings\r\n",
    "old mac\rline\rendings",
    "null\x00byte in the middle",
    "bell\x07 backspace\x08 escape\x1b[31mred\x1b[0m",
    "vertical\x0btab and form\x0cfeed",
    "delete\x7f char and C1 \x80\x85\x9f controls",
    "zero\u200bwidth\u200cnon\u200djoiner\u2060word joiner",
    "soft\u00adhyphen and \u00adleading",
    "\ufeffbyte order mark at the start",
    "byte order mark \ufeff in the middle",
    "\ufeff\ufeff two byte order marks",
    "bidi \u200e\u200f marks \u202a\u202b\u202c\u202d\u202e embeddings \u2066\u2067\u2068\u2069 isolates",
    "private use \ue000\ue001\uf8ff and \U000f0000 plane 15",
    "noncharacters \ufdd0 \ufffe \uffff \U0001fffe",
    "unassigned \u0378 \u0379 \U000e0080 code points",
    "variation selectors \ufe00\ufe0f and \U000e0100",
    "language tags \U000e0001\U000e0065\U000e006e",
    "replacement character \ufffd in text",
    "\x01\x02\x03\x04\x05",
    "interlinear \ufff9annotation\ufffa\ufffb",
    "object replacement \ufffc character",
    "Mongolian \u180b\u180c\u180d free variation selectors",
    "Hangul fillers \u115f\u1160\u3164\uffa0",
]

WHITESPACE = [
    "",
    " ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    " \t\n\r\x0b\x0c ",
    "\u00a0",
    "\u3000",
    "\u2028\u2029",
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
    "\u202f\u205f\u1680",
    "\x85",
    "\ufeff",
    "\u200b",
    "\x00",
    "    leading and trailing spaces    ",
    "multiple     internal      spaces",
    "non\u00a0breaking\u00a0spaces and\u2009thin\u2009spaces and\u3000ideographic",
    "line\u2028separator and paragraph\u2029separator",
    "narrow\u202fno-break and medium\u205fmath space",
]

SPECIAL_TOKENS = [
    "[CLS]",
    "[SEP]",
    "[CLS] hello [SEP] world [SEP]",
    "please [MASK] the door",
    "[mask] lowercase is not special",
    "[ MASK ] with spaces is not special",
    "x[PAD]y glued special token",
    "[UNK][UNK][UNK]",
    "[[CLS]]",
    "[CLS[SEP]]",
    "[MASKED] is not [MASK]",
    "[unused0] [unused1] vocab entries that are not special",
    "##ing ##s continuation markers typed by hand",
    "[CL\u200bS] with a zero-width space inside",
    "\ufeff[CLS] after a byte order mark",
    "\u00e9[SEP]\u00e9 accents around a special token",
]

INVALID_UTF8 = [
    b"lone continuation \x80 byte",
    b"overlong slash \xc0\xaf and \xe0\x80\xaf",
    b"surrogate \xed\xa0\x80 half",
    b"truncated four-byte \xf0\x9f\x98 sequence",
    b"truncated at the end \xe2\x82",
    b"\xf5\xf6\xf7\xf8\xf9\xfa\xfb\xfc\xfd\xfe\xff invalid lead bytes",
    b"caf\xe9 latin-1 in utf-8",
    b"na\xefve r\xe9sum\xe9",
    b"\xff\xfe\x00h\x00i UTF-16 LE bytes",
    b"mixed \xe2\x9c\x93 valid \xe2\x9c invalid \xe2\x9c\x93 valid",
    b"\xc2",
    b"\x80\x81\x82",
    b"beyond U+10FFFF \xf4\x90\x80\x80",
    b"word\xffword",
    b"\xef\xbb\xbf\xef\xbb\xbfdouble BOM bytes",
    b"\xe4\xb8\xad\xe6\x96 truncated CJK",
    b"[CLS]\xff[SEP]",
    b"\xed\xbf\xbf\xf0\x80\x80\x80 surrogate and overlong",
    b"ascii then \xc3\x28 bad second byte",
    b"\xe0\xa0 short \xf0\x90\x80 short \xf4\x8f\xbf short",
]

LONG_WORDS = [
    "a" * 99,
    "a" * 100,
    "a" * 101,
    "b" * 200,
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "supercalifragilisticexpialidocious " * 3,
    "x" * 100 + " " + "y" * 100,
    "\u00e9" * 101,
    "e\u0301" * 60,
    "\u4e2d" * 120,
    "ab" * 51,
    "-" * 150,
    "abc" + "\u0301" * 200,
    "hashtag#" * 20,
    "The" + "very" * 30 + "longword",
]


def _random_texts(seed, count):
    """Random strings mixing characters of many classes, the same for a given seed."""
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        " \t\n\r\u00a0\u3000\u2028",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\u00bf\u00a1\u2014\u2026\u3002",
        "\u00e0\u00e9\u00ee\u00f5\u00fc\u00c7\u00d1\u0107\u0161\u017e\u0142\u0131\u0130\u00df",
        "\u0301\u0308\u0327\u0303\u0323",
        "\u4e00\u4e8c\u4e09\u5927\u5c0f\u4eba\u65e5\u6708\uf900",
        "\u3042\u3044\u3046\u30a2\u30a4\u30a6\uac00\ub098\ub2e4",
        "\u0391\u03b2\u03b3\u03a3\u03c2\u0416\u0436\u05d0\u0627\u0928\u094d",
        "\U0001f600\U0001f44d\U0001f3fd\u200d\u2764\ufe0f",
        "\x00\x01\x1b\x7f\u200b\u00ad\ufeff\ue000\ufffd",
    ]
    out = []
    for _ in range(count):
        n = rng.randint(1, 60)
        out.append("".join(rng.choice(rng.choice(pools)) for _ in range(n)))
    return out


def _long_texts():
    """Texts around and past 256 tokens, to exercise truncation at max_seq_length."""
    words = ("sentence embeddings compress meaning into fixed vectors that we compare with cosine "
             "similarity").split()
    out = []
    for n in (120, 200, 250, 251, 252, 253, 254, 255, 256, 257, 260, 300, 500, 1000):
        out.append(" ".join(words[i % len(words)] for i in range(n)))
    out.append(" ".join(ENGLISH) * 2)
    out.append("\u4e2d\u6587" * 200)
    out.append("! " * 400)
    out.append("supercalifragilisticexpialidocious " * 60)
    out.append(("[MASK] " * 300).strip())
    return out


def sentences():
    groups = [
        ("english", ENGLISH), ("punctuation", PUNCTUATION), ("numbers", NUMBERS),
        ("european", EUROPEAN), ("cjk", CJK), ("other_scripts", OTHER_SCRIPTS), ("emoji", EMOJI),
        ("urls", URLS), ("code", CODE), ("control", CONTROL), ("whitespace", WHITESPACE),
        ("special_tokens", SPECIAL_TOKENS), ("long_words", LONG_WORDS), ("long_texts", _long_texts()),
    ]
    out = []
    for name, texts in groups:
        out += [(name, t.encode("utf-8")) for t in texts]
    out += [("invalid_utf8", b) for b in INVALID_UTF8]
    # Mixed scripts: pairs of sentences from different groups joined.
    rng = random.Random(20261201)
    pool = ENGLISH + EUROPEAN + CJK + OTHER_SCRIPTS + EMOJI + NUMBERS
    for _ in range(60):
        a, b = rng.sample(pool, 2)
        out.append(("mixed", (a + " " + b).encode("utf-8")))
    out += [("random", t.encode("utf-8")) for t in _random_texts(7, 120)]
    return out


def write_jsonl(path, header, chosen, ids, full):
    """A header line, then per sentence {"group", "text" (UTF-8) or "hex" (other bytes), "ids",
    "untruncated" (the id count without truncation)}."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for (group, raw), row, whole in zip(chosen, ids, full):
            rec = {"group": group}
            try:
                rec["text"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                rec["hex"] = raw.hex()
            rec["ids"] = row
            rec["untruncated"] = len(whole)
            f.write(json.dumps(rec, ensure_ascii=True) + "\n")
