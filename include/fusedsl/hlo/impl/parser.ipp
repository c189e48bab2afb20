#pragma once
// HLO text parser: the lexer and the recursive-descent parser.
// The bodies of fusedsl/hlo/parser.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/hlo/parser.hpp"

namespace fusedsl::hlo {

namespace detail {

enum class tok : std::uint8_t {
  end,
  word,
  string,
  lbrace,
  rbrace,
  lparen,
  rparen,
  lbracket,
  rbracket,
  comma,
  equals,
  colon,
  arrow,
  le,
  other
};

struct token {
  tok kind = tok::end;
  std::string text;  // word text; unescaped string contents; the character for `other`
  std::size_t line = 1, column = 1;
};

inline bool is_word_char(char c) {
  return is_identifier_char(c) || c == '%' || c == '+' || c == '$';
}

// Splits HLO text into tokens; a "word" is a run of identifier characters and '%', '+', '$'
// (names, keywords, numbers such as -1.5e+3, and values such as 0_0x1_1).
class lexer {
 public:
  explicit lexer(std::string_view text) : s_(text) {}

  std::vector<token> run() {
    std::vector<token> out;
    for (;;) {
      skip_space_and_comments();
      token t;
      t.line = line_;
      t.column = col_;
      if (i_ >= s_.size()) {
        out.push_back(t);
        return out;
      }
      char c = s_[i_];
      if (c == '"') {
        t.kind = tok::string;
        t.text = read_string();
      } else if (c == '-' && peek(1) == '>') {
        t.kind = tok::arrow;
        advance(2);
      } else if (c == '<' && peek(1) == '=') {
        t.kind = tok::le;
        advance(2);
      } else if (is_word_char(c)) {
        t.kind = tok::word;
        while (i_ < s_.size() && is_word_char(s_[i_]) && !(s_[i_] == '-' && peek(1) == '>')) {
          t.text += s_[i_];
          advance(1);
        }
      } else {
        switch (c) {
          case '{':
            t.kind = tok::lbrace;
            break;
          case '}':
            t.kind = tok::rbrace;
            break;
          case '(':
            t.kind = tok::lparen;
            break;
          case ')':
            t.kind = tok::rparen;
            break;
          case '[':
            t.kind = tok::lbracket;
            break;
          case ']':
            t.kind = tok::rbracket;
            break;
          case ',':
            t.kind = tok::comma;
            break;
          case '=':
            t.kind = tok::equals;
            break;
          case ':':
            t.kind = tok::colon;
            break;
          default:
            t.kind = tok::other;
            t.text = std::string(1, c);
        }
        advance(1);
      }
      out.push_back(std::move(t));
    }
  }

 private:
  char peek(std::size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  void advance(std::size_t n) {
    for (std::size_t k = 0; k < n && i_ < s_.size(); ++k) {
      if (s_[i_++] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
  }
  [[noreturn]] void fail(const std::string& what) const { throw parse_error(line_, col_, what); }

  void skip_space_and_comments() {
    for (;;) {
      while (i_ < s_.size() &&
             (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
        advance(1);
      if (peek(0) == '/' && peek(1) == '*') {
        std::size_t l = line_, c = col_;
        advance(2);
        while (i_ < s_.size() && !(peek(0) == '*' && peek(1) == '/')) advance(1);
        if (i_ >= s_.size()) throw parse_error(l, c, "unterminated /* comment");
        advance(2);
      } else if (peek(0) == '/' && peek(1) == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') advance(1);
      } else {
        return;
      }
    }
  }

  // C-style escapes: \" \\ \' \n \t \r \ooo \xHH.
  std::string read_string() {
    std::size_t l = line_, c = col_;
    advance(1);
    std::string out;
    for (;;) {
      if (i_ >= s_.size() || s_[i_] == '\n') throw parse_error(l, c, "unterminated string");
      char ch = s_[i_];
      if (ch == '"') {
        advance(1);
        return out;
      }
      if (ch != '\\') {
        out += ch;
        advance(1);
        continue;
      }
      char e = peek(1);
      advance(2);
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '"':
          out += '"';
          break;
        case '\'':
          out += '\'';
          break;
        case '\\':
          out += '\\';
          break;
        case 'x': {
          int v = 0, n = 0;
          while (n < 2 && std::isxdigit(static_cast<unsigned char>(peek(0)))) {
            char h = peek(0);
            v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
            advance(1);
            ++n;
          }
          if (n == 0) fail("expected hex digits after \\x");
          out += static_cast<char>(v);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0', n = 1;
            while (n < 3 && peek(0) >= '0' && peek(0) <= '7') {
              v = v * 8 + (peek(0) - '0');
              advance(1);
              ++n;
            }
            if (v > 255) fail("octal escape out of range");
            out += static_cast<char>(v);
          } else {
            fail(std::string("unknown escape \\") + e);
          }
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0, line_ = 1, col_ = 1;
};

inline std::string describe(const token& t) {
  switch (t.kind) {
    case tok::end:
      return "end of input";
    case tok::word:
      return "'" + t.text + "'";
    case tok::string:
      return "a string";
    case tok::lbrace:
      return "'{'";
    case tok::rbrace:
      return "'}'";
    case tok::lparen:
      return "'('";
    case tok::rparen:
      return "')'";
    case tok::lbracket:
      return "'['";
    case tok::rbracket:
      return "']'";
    case tok::comma:
      return "','";
    case tok::equals:
      return "'='";
    case tok::colon:
      return "':'";
    case tok::arrow:
      return "'->'";
    case tok::le:
      return "'<='";
    case tok::other:
      return "'" + t.text + "'";
  }
  return "?";
}

class parser {
 public:
  explicit parser(std::string_view text) : toks_(lexer(text).run()) {}

  module parse_module() {
    expect_keyword("HloModule");
    module m;
    m.name = expect_name("a module name");
    // input_output_alias is read; other module attributes (entry_computation_layout=...,
    // is_scheduled=..., ...) are skipped.
    std::optional<token> alias_at;
    while (accept(tok::comma)) {
      const token& key = peek();
      const std::string k = expect_word("a module attribute name");
      expect(tok::equals, "'='");
      if (k == "input_output_alias") {
        alias_at = key;
        m.input_output_alias = parse_aliases();
      } else {
        skip_value();
      }
    }
    while (peek().kind != tok::end) parse_computation(m);
    if (m.entry.empty()) {
      if (m.computations.empty()) fail(peek(), "expected at least one computation");
      m.entry = m.computations.back().name;  // XLA's rule when nothing is marked ENTRY
    }
    if (alias_at) {
      try {
        verify_aliases(m);
      } catch (const ir_error& e) {
        fail(*alias_at, e.what());
      }
    }
    return m;
  }

  shape parse_shape(int depth = 0) {
    if (depth > max_tuple_depth)
      fail(peek(), "tuple shapes nested deeper than " + std::to_string(max_tuple_depth));
    if (accept(tok::lparen)) {
      std::vector<shape> es;
      if (!accept(tok::rparen)) {
        do es.push_back(parse_shape(depth + 1));
        while (accept(tok::comma));
        expect(tok::rparen, "')' closing a tuple shape");
      }
      return shape::make_tuple(std::move(es));
    }
    const token& t = peek();
    if (t.kind != tok::word) fail(t, "expected a shape");
    auto type = parse_element_type(t.text);
    if (!type)
      fail(t, "unsupported element type '" + t.text +
                  "' (supported: pred, s8, u8, s32, s64, f16, bf16, f32, f64)");
    next();
    expect(tok::lbracket, "'[' after the element type");
    shape s;
    s.type = *type;
    if (!accept(tok::rbracket)) {
      do s.dims.push_back(expect_int("a dimension size", 0));
      while (accept(tok::comma));
      expect(tok::rbracket, "']' or ','");
    }
    try {
      shape::check_dims(s.dims);
    } catch (const ir_error& e) {
      fail(prev(), e.what());
    }
    // A layout follows: '{' then a dimension, '}' or ':' (a '{' before a name opens a body).
    std::int64_t ignored = 0;
    if (peek().kind == tok::lbrace &&
        (peek(1).kind == tok::rbrace || peek(1).kind == tok::colon ||
         (peek(1).kind == tok::word && to_int(peek(1).text, ignored)))) {
      next();
      std::vector<std::int64_t> layout;
      if (peek().kind == tok::word) {
        do layout.push_back(expect_int("a layout dimension", 0));
        while (accept(tok::comma));
      }
      if (accept(tok::colon))
        skip_until_rbrace();  // tiling T(..), memory space S(..): not modelled
      expect(tok::rbrace, "'}' closing the layout");
      if (!layout.empty() || s.rank() == 0) {
        if (static_cast<std::int64_t>(layout.size()) != s.rank())
          fail(prev(), "layout {" + std::to_string(layout.size()) + " dims} does not match rank " +
                           std::to_string(s.rank()));
        std::vector<bool> seen(layout.size(), false);
        for (std::int64_t d : layout) {
          if (d >= s.rank() || seen[static_cast<std::size_t>(d)])
            fail(prev(), "layout is not a permutation of the dimensions");
          seen[static_cast<std::size_t>(d)] = true;
        }
        if (layout != shape::layout_of_rank(s.rank())) s.minor_to_major = std::move(layout);
      }
    }
    return s;
  }

  const token& peek() const { return toks_[pos_]; }

 private:
  // Reading tokens (next, prev, peek) and failing at one.
  const token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  const token& prev() const { return toks_[pos_ > 0 ? pos_ - 1 : 0]; }
  const token& peek(std::size_t k) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  [[noreturn]] static void fail(const token& t, const std::string& what) {
    throw parse_error(t.line, t.column, what);
  }
  bool accept(tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  const token& expect(tok k, const std::string& what) {
    if (peek().kind != k) fail(peek(), "expected " + what + ", got " + describe(peek()));
    return next();
  }
  bool accept_word(std::string_view w) {
    if (peek().kind != tok::word || peek().text != w) return false;
    next();
    return true;
  }
  void expect_keyword(std::string_view w) {
    if (!accept_word(w)) fail(peek(), "expected '" + std::string(w) + "', got " + describe(peek()));
  }
  const std::string& expect_word(const std::string& what) { return expect(tok::word, what).text; }
  // A name, with the '%' dropped.
  std::string expect_name(const std::string& what) {
    const token& t = peek();
    if (t.kind != tok::word) fail(t, "expected " + what + ", got " + describe(t));
    std::string n = t.text[0] == '%' ? t.text.substr(1) : t.text;
    if (!is_identifier_token(n)) fail(t, "expected " + what + ", got " + describe(t));
    next();
    return n;
  }
  std::int64_t expect_int(const std::string& what,
                          std::int64_t min = std::numeric_limits<std::int64_t>::min()) {
    const token& t = peek();
    std::int64_t v = 0;
    if (t.kind != tok::word || !to_int(t.text, v))
      fail(t, "expected " + what + ", got " + describe(t));
    if (v < min) fail(t, what + " must be at least " + std::to_string(min) + ", got " + t.text);
    next();
    return v;
  }
  static bool to_int(const std::string& s, std::int64_t& v) {
    if (s.empty()) return false;
    std::size_t i = s[0] == '-' ? 1 : 0;
    if (i == s.size()) return false;
    for (std::size_t k = i; k < s.size(); ++k)
      if (s[k] < '0' || s[k] > '9') return false;
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (errno == ERANGE) return false;
    v = x;
    return true;
  }
  // {1,2,3} or {}
  std::vector<std::int64_t> parse_int_list() {
    expect(tok::lbrace, "'{'");
    std::vector<std::int64_t> v;
    if (accept(tok::rbrace)) return v;
    do v.push_back(expect_int("an integer"));
    while (accept(tok::comma));
    expect(tok::rbrace, "'}' or ','");
    return v;
  }
  // Skips an attribute value: a balanced {...} / (...) / [...] group, a string, or one word
  // (possibly followed by further groups, as in T(8,128)).
  void skip_value() {
    const token& t = peek();
    if (t.kind == tok::string) {
      next();
      return;
    }
    if (t.kind == tok::lbrace || t.kind == tok::lparen || t.kind == tok::lbracket) {
      skip_group();
      return;
    }
    if (t.kind != tok::word) fail(t, "expected an attribute value, got " + describe(t));
    next();
    while (peek().kind == tok::lparen || peek().kind == tok::lbracket) skip_group();
  }
  void skip_group() {
    const token& open = next();
    int depth = 1;
    while (depth > 0) {
      const token& t = next();
      if (t.kind == tok::end) fail(open, "unbalanced " + describe(open));
      if (t.kind == tok::lbrace || t.kind == tok::lparen || t.kind == tok::lbracket) ++depth;
      if (t.kind == tok::rbrace || t.kind == tok::rparen || t.kind == tok::rbracket) --depth;
    }
  }
  void skip_until_rbrace() {
    while (peek().kind != tok::rbrace) {
      if (peek().kind == tok::end) fail(peek(), "expected '}'");
      if (peek().kind == tok::lparen || peek().kind == tok::lbracket || peek().kind == tok::lbrace)
        skip_group();
      else
        next();
    }
  }

  // { {0}: (0, {}, may-alias), {1}: (2, {1}, must-alias) }, sorted by output index.
  std::vector<io_alias> parse_aliases() {
    std::vector<io_alias> out;
    expect(tok::lbrace, "'{' opening input_output_alias");
    if (accept(tok::rbrace)) return out;
    do {
      const token& at = peek();
      io_alias a;
      a.output_index = parse_int_list();
      expect(tok::colon, "':' after the output index");
      expect(tok::lparen, "'(' opening the aliased parameter");
      a.parameter_number = expect_int("a parameter number", 0);
      expect(tok::comma, "','");
      a.parameter_index = parse_int_list();
      if (accept(tok::comma)) {
        const token& kt = peek();
        const std::string kind = expect_word("may-alias or must-alias");
        if (kind != "may-alias" && kind != "must-alias")
          fail(kt, "expected may-alias or must-alias, got " + describe(kt));
        a.must_alias = kind == "must-alias";
      }
      expect(tok::rparen, "')' closing the aliased parameter");
      if (!out.empty() && !(out.back().output_index < a.output_index))
        fail(at, "input_output_alias entries must be sorted by output index, each once");
      out.push_back(std::move(a));
    } while (accept(tok::comma));
    expect(tok::rbrace, "'}' closing input_output_alias");
    return out;
  }

  // ---- computations ----
  void parse_computation(module& m) {
    bool entry = accept_word("ENTRY");
    const token& name_tok = peek();
    std::string name = expect_name("a computation name");
    if (m.find(name)) fail(name_tok, "duplicate computation " + name);
    if (peek().kind == tok::lparen) {  // signature: (a: f32[2], ...) -> shape; implied by the body
      skip_group();
      expect(tok::arrow, "'->' after the parameter list");
      parse_shape();
    }
    // Optional computation attributes, e.g. execution_thread="...".
    while (peek().kind == tok::comma) {
      next();
      expect_word("an attribute name");
      expect(tok::equals, "'='");
      skip_value();
    }
    expect(tok::lbrace, "'{' opening computation " + name);
    computation_builder b(name);
    std::map<std::string, instruction_id, std::less<>> ids;
    std::optional<instruction_id> root;
    while (!accept(tok::rbrace)) {
      bool is_root = accept_word("ROOT");
      const token& at = peek();
      instruction in = parse_instruction(ids, b);
      if (ids.count(in.name)) fail(at, "duplicate instruction name " + in.name);
      std::string n = in.name;
      instruction_id id = 0;
      try {
        id = b.append_checked(std::move(in), m);
      } catch (const ir_error& e) {
        fail(at, e.what());
      }
      ids.emplace(n, id);
      if (is_root) {
        if (root) fail(at, "second ROOT in computation " + name);
        root = id;
      }
    }
    if (b.size() == 0) fail(prev(), "computation " + name + " has no instructions");
    computation c = b.build(root);
    try {
      if (!c.instructions.empty()) {
        auto ps = c.parameters();
        for (std::size_t i = 0; i < ps.size(); ++i)
          if (c.instructions[ps[i]].parameter_number != static_cast<std::int64_t>(i))
            throw ir_error("parameter numbers are not 0.." + std::to_string(ps.size() - 1));
      }
    } catch (const ir_error& e) {
      fail(name_tok, "computation " + name + ": " + e.what());
    }
    if (entry) {
      if (!m.entry.empty()) fail(name_tok, "second ENTRY computation " + name);
      m.entry = name;
    }
    m.computations.push_back(std::move(c));
  }

  instruction parse_instruction(const std::map<std::string, instruction_id, std::less<>>& ids,
                                const computation_builder& b) {
    instruction in;
    in.name = expect_name("an instruction name");
    expect(tok::equals, "'=' after the instruction name");
    in.shape = parse_shape();
    const token& op_tok = peek();
    if (op_tok.kind != tok::word) fail(op_tok, "expected an opcode, got " + describe(op_tok));
    auto op = parse_opcode(op_tok.text);
    // jax's sharding annotations are identity custom-calls; they are read as copy (with the
    // sharding, if any), which is what our printers write a sharding constraint as.
    const bool custom_call = op_tok.text == "custom-call";
    if (custom_call) op = opcode::copy;
    if (!op) fail(op_tok, "unsupported opcode '" + op_tok.text + "'");
    in.opcode = *op;
    const token op_at = next();
    expect(tok::lparen, "'(' after the opcode");
    if (in.opcode == opcode::parameter) {
      in.parameter_number = expect_int("a parameter number", 0);
      expect(tok::rparen, "')'");
    } else if (in.opcode == opcode::constant) {
      in.literal = parse_literal(in.shape);
      expect(tok::rparen, "')' after the constant value");
    } else if (!accept(tok::rparen)) {
      do in.operands.push_back(parse_operand(ids, b));
      while (accept(tok::comma));
      expect(tok::rparen, "')' or ',' in the operand list");
    }
    custom_call_target_.reset();
    gather_vector_dim_ = false;
    while (accept(tok::comma)) parse_attribute(in);
    check_attributes(in, op_at);
    if (custom_call) {
      const std::string target = custom_call_target_.value_or("");
      if (target != "Sharding" && target != "xla.sdy.FuncResultSharding")
        fail(op_at,
             "unsupported opcode 'custom-call' (custom_call_target=\"" + target +
                 "\"; only the identity targets Sharding and xla.sdy.FuncResultSharding are read)");
      if (in.operands.size() != 1) fail(op_at, "custom-call " + target + " takes 1 operand");
    }
    return in;
  }

  instruction_id parse_operand(const std::map<std::string, instruction_id, std::less<>>& ids,
                               const computation_builder& b) {
    std::optional<shape> declared;
    const token& t = peek();
    if (t.kind == tok::lparen ||
        (t.kind == tok::word && peek(1).kind == tok::lbracket && t.text[0] != '%')) {
      declared = parse_shape();
    }
    const token& nt = peek();
    std::string n = expect_name("an operand name");
    auto it = ids.find(n);
    if (it == ids.end()) fail(nt, "operand %" + n + " is not defined before this instruction");
    if (declared && !declared->compatible(b.shape_of(it->second)))
      fail(nt, "operand %" + n + " is declared " + to_short_string(*declared) + " but is " +
                   to_short_string(b.shape_of(it->second)));
    return it->second;
  }

  // ---- literals ----
  double parse_scalar_value(element_type t) {
    const token& tk = peek();
    if (tk.kind != tok::word) fail(tk, "expected a number, got " + describe(tk));
    const std::string& s = tk.text;
    double v = 0;
    if (t == element_type::pred) {
      if (s == "true")
        v = 1;
      else if (s == "false")
        v = 0;
      else
        fail(tk, "expected true or false, got " + describe(tk));
    } else if (is_integral(t)) {
      std::int64_t i = 0;
      if (!to_int(s, i)) fail(tk, "expected an integer, got " + describe(tk));
      v = static_cast<double>(i);
    } else if (s == "inf" || s == "+inf") {
      v = std::numeric_limits<double>::infinity();
    } else if (s == "-inf") {
      v = -std::numeric_limits<double>::infinity();
    } else if (s == "nan" || s == "-nan" || s.rfind("nan(", 0) == 0 || s.rfind("-nan(", 0) == 0) {
      v = std::numeric_limits<double>::quiet_NaN();
    } else {
      bool ok = !s.empty();
      for (char c : s)
        ok = ok && (std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' ||
                    c == 'E' || c == '-' || c == '+');
      char* end = nullptr;
      if (ok) v = std::strtod(s.c_str(), &end);
      if (!ok || end != s.c_str() + s.size()) fail(tk, "expected a number, got " + describe(tk));
    }
    next();
    if ((s == "nan" || s == "-nan") && peek().kind == tok::lparen) skip_group();  // nan(0x...)
    return v;
  }

  literal parse_literal(const shape& s) {
    if (s.is_tuple()) fail(peek(), "tuple-shaped constants are not supported");
    std::vector<double> vals;
    std::vector<std::int64_t> ints;
    auto one = [&] {
      const token& t = peek();
      if (is_integral(s.type)) {
        std::int64_t i = 0;
        if (t.kind != tok::word || !to_int(t.text, i))
          fail(t, "expected an integer, got " + describe(t));
        next();
        ints.push_back(i);
      } else {
        vals.push_back(parse_scalar_value(s.type));
      }
    };
    if (s.rank() == 0) {
      one();
    } else {
      if (peek().kind == tok::lbrace && peek(1).kind == tok::word && peek(1).text == "...")
        fail(peek(), "constant values are elided ('{...}'); print the module with large constants");
      parse_nested(s, 0, one);
    }
    try {
      hlo::shape plain = hlo::shape::array(s.type, s.dims);
      literal l = is_integral(s.type) ? literal::array_int(plain, std::move(ints))
                                      : literal::array(plain, std::move(vals));
      l.shape = s;
      return l;
    } catch (const ir_error& e) {
      fail(prev(), e.what());
    }
  }
  template <class F>
  void parse_nested(const shape& s, std::size_t d, F& one) {
    const token& open = expect(tok::lbrace, "'{' in the constant");
    std::int64_t n = 0;
    if (peek().kind != tok::rbrace) {
      do {
        if (d + 1 == s.dims.size())
          one();
        else
          parse_nested(s, d + 1, one);
        ++n;
      } while (accept(tok::comma));
    }
    expect(tok::rbrace, "'}' or ',' in the constant");
    if (n != s.dims[d])
      fail(open, "constant has " + std::to_string(n) + " elements in dimension " +
                     std::to_string(d) + ", shape says " + std::to_string(s.dims[d]));
  }

  // ---- attributes ----
  // An attribute the IR models but the instruction's opcode does not use is an error (XLA's
  // parser refuses it too); kept, it would vanish in printing and the module would not read back.
  void check_attributes(instruction& in, const token& at) {
    const opcode op = in.opcode;
    const auto refuse = [&](std::string_view attribute) {
      fail(at, "attribute " + std::string(attribute) + "= does not apply to " +
                   std::string(to_string(op)));
    };
    if (in.tuple_index != -1 && op != opcode::get_tuple_element) refuse("index");
    if (in.iota_dimension != -1 && op != opcode::iota) refuse("iota_dimension");
    if (in.direction && op != opcode::compare) refuse("direction");
    if (!in.slice.empty() && op != opcode::slice) refuse("slice");
    if (in.dot && op != opcode::dot) refuse("lhs/rhs_*_dims");
    if (in.fusion_kind && op != opcode::fusion) refuse("kind");
    if (in.gather && op != opcode::gather) refuse("offset_dims/collapsed_slice_dims/...");
    if (!in.slice_sizes.empty() && op != opcode::gather) refuse("slice_sizes");
    if (in.indices_are_sorted && op != opcode::gather) refuse("indices_are_sorted");
    if (!in.dynamic_slice_sizes.empty() && op != opcode::dynamic_slice)
      refuse("dynamic_slice_sizes");
    if (op == opcode::gather && in.gather && !gather_vector_dim_)
      fail(at, "gather needs index_vector_dim=");
    if (!in.dimensions.empty() && op != opcode::broadcast && op != opcode::reduce &&
        op != opcode::transpose && op != opcode::concatenate)
      refuse("dimensions");
    // dot with every list empty ("lhs_batch_dims={}") means no dimension numbers at all.
    if (in.dot && in.dot->lhs_batch.empty() && in.dot->lhs_contracting.empty() &&
        in.dot->rhs_batch.empty() && in.dot->rhs_contracting.empty())
      in.dot.reset();
  }

  void parse_attribute(instruction& in) {
    const token& at = peek();
    std::string key = expect_word("an attribute name");
    expect(tok::equals, "'=' after attribute " + key);
    if (key == "dimensions") {
      in.dimensions = parse_int_list();
    } else if (key == "lhs_batch_dims") {
      dot(in).lhs_batch = parse_int_list();
    } else if (key == "lhs_contracting_dims") {
      dot(in).lhs_contracting = parse_int_list();
    } else if (key == "rhs_batch_dims") {
      dot(in).rhs_batch = parse_int_list();
    } else if (key == "rhs_contracting_dims") {
      dot(in).rhs_contracting = parse_int_list();
    } else if (key == "direction") {
      const token& t = peek();
      auto d = t.kind == tok::word ? parse_comparison_direction(t.text) : std::nullopt;
      if (!d)
        fail(t, "expected a comparison direction (EQ, NE, LT, LE, GT, GE), got " + describe(t));
      in.direction = d;
      next();
    } else if (key == "slice") {
      expect(tok::lbrace, "'{' opening the slice");
      if (!accept(tok::rbrace)) {
        do {
          expect(tok::lbracket, "'[' in the slice");
          slice_dim r;
          r.start = expect_int("a slice start", 0);
          expect(tok::colon, "':'");
          r.limit = expect_int("a slice limit", 0);
          if (accept(tok::colon)) r.stride = expect_int("a slice stride", 1);
          expect(tok::rbracket, "']' in the slice");
          in.slice.push_back(r);
        } while (accept(tok::comma));
        expect(tok::rbrace, "'}' closing the slice");
      }
    } else if (key == "offset_dims") {
      gather(in).offset_dims = parse_int_list();
    } else if (key == "collapsed_slice_dims") {
      gather(in).collapsed_slice_dims = parse_int_list();
    } else if (key == "start_index_map") {
      gather(in).start_index_map = parse_int_list();
    } else if (key == "operand_batching_dims") {
      gather(in).operand_batching_dims = parse_int_list();
    } else if (key == "start_indices_batching_dims") {
      gather(in).start_indices_batching_dims = parse_int_list();
    } else if (key == "index_vector_dim") {
      gather(in).index_vector_dim = expect_int("the index vector dimension", 0);
      gather_vector_dim_ = true;
    } else if (key == "slice_sizes") {
      in.slice_sizes = parse_int_list();
    } else if (key == "dynamic_slice_sizes") {
      in.dynamic_slice_sizes = parse_int_list();
    } else if (key == "indices_are_sorted") {
      const token& t = peek();
      if (t.kind != tok::word || (t.text != "true" && t.text != "false"))
        fail(t, "expected true or false, got " + describe(t));
      in.indices_are_sorted = t.text == "true";
      next();
    } else if (key == "iota_dimension") {
      in.iota_dimension = expect_int("the iota dimension", 0);
    } else if (key == "index") {
      in.tuple_index = expect_int("a tuple index", 0);
    } else if (key == "to_apply" || key == "calls") {
      in.called_computation = expect_name("a computation name");
    } else if (key == "kind") {
      const token& t = peek();
      auto k = t.kind == tok::word ? parse_fusion_kind(t.text) : std::nullopt;
      if (!k) fail(t, "expected a fusion kind (kLoop, kInput, kOutput), got " + describe(t));
      in.fusion_kind = k;
      next();
    } else if (key == "sharding") {
      in.sharding = parse_sharding();
    } else if (key == "custom_call_target") {
      custom_call_target_ = expect(tok::string, "a string").text;
    } else if (key == "metadata") {
      expect(tok::lbrace, "'{' opening metadata");
      while (!accept(tok::rbrace)) {
        std::string k = expect_word("a metadata field");
        expect(tok::equals, "'='");
        if (k == "op_name")
          in.op_name = expect(tok::string, "a string").text;
        else
          skip_value();
        accept(tok::comma);
      }
    } else {
      (void)at;
      skip_value();  // attributes the IR does not model
    }
  }
  static dot_dimension_numbers& dot(instruction& in) {
    if (!in.dot) in.dot.emplace();
    return *in.dot;
  }
  static gather_dimension_numbers& gather(instruction& in) {
    if (!in.gather) in.gather.emplace();
    return *in.gather;
  }

  sharding parse_sharding(int depth = 0) {
    if (depth > max_tuple_depth)
      fail(peek(), "tuple shardings nested deeper than " + std::to_string(max_tuple_depth));
    expect(tok::lbrace, "'{' opening the sharding");
    if (peek().kind == tok::lbrace || peek().kind == tok::rbrace) {  // tuple sharding
      std::vector<sharding> es;
      if (!accept(tok::rbrace)) {
        do es.push_back(parse_sharding(depth + 1));
        while (accept(tok::comma));
        expect(tok::rbrace, "'}' closing the tuple sharding");
      }
      return sharding::make_tuple(std::move(es));
    }
    sharding s;
    const token& t = peek();
    std::string w = expect_word("a sharding");
    if (w == "replicated") {
      s = sharding::replicated();
    } else if (w == "manual") {
      s = sharding::manual();
    } else if (w == "maximal") {
      expect_keyword("device");
      expect(tok::equals, "'='");
      s = sharding::maximal(expect_int("a device number", 0));
    } else if (w == "devices") {
      expect(tok::equals, "'='");
      s.k = sharding::kind::tiled;
      expect(tok::lbracket, "'['");
      do s.tile_dims.push_back(expect_int("a tile count", 1));
      while (accept(tok::comma));
      expect(tok::rbracket, "']'");
      if (accept(tok::le)) {
        expect(tok::lbracket, "'[' after '<='");
        do s.iota_dims.push_back(expect_int("a dimension", 1));
        while (accept(tok::comma));
        expect(tok::rbracket, "']'");
        if (peek().kind == tok::word && peek().text == "T") {
          next();
          expect(tok::lparen, "'(' after T");
          do s.iota_perm.push_back(expect_int("a permutation index", 0));
          while (accept(tok::comma));
          expect(tok::rparen, "')'");
        }
      } else {
        do s.devices.push_back(expect_int("a device number", 0));
        while (accept(tok::comma));
      }
      std::int64_t n = 0, m = 0;
      try {
        n = s.device_count();
        m = s.devices.empty() ? sharding::product(s.iota_dims)
                              : static_cast<std::int64_t>(s.devices.size());
      } catch (const ir_error& e) {
        fail(t, e.what());
      }
      if (m != n)
        fail(t, "sharding lists a different number of devices than its " + std::to_string(n) +
                    " tiles");
      if (accept_word("last_tile_dim_replicate")) s.last_tile_dim_replicate = true;
    } else {
      fail(t,
           "unsupported sharding '" + w + "' (supported: replicated, manual, maximal, devices=)");
    }
    // Further sharding fields (metadata={...}, last_tile_dims={...}) are not modelled.
    while (peek().kind != tok::rbrace) {
      if (peek().kind == tok::end) fail(peek(), "expected '}' closing the sharding");
      if (peek().kind == tok::lbrace || peek().kind == tok::lparen || peek().kind == tok::lbracket)
        skip_group();
      else
        next();
    }
    next();
    return s;
  }

  std::vector<token> toks_;
  std::size_t pos_ = 0;
  std::optional<std::string> custom_call_target_;  // of the instruction being parsed
  bool gather_vector_dim_ = false;                 // index_vector_dim= seen on it
};

}  // namespace detail

FUSEDSL_DECL module parse_module(std::string_view text) {
  return detail::parser(text).parse_module();
}

FUSEDSL_DECL shape parse_shape(std::string_view text) {
  detail::parser p(text);
  shape s = p.parse_shape();
  if (p.peek().kind != detail::tok::end)
    throw parse_error(p.peek().line, p.peek().column,
                      "unexpected " + detail::describe(p.peek()) + " after the shape");
  return s;
}

}  // namespace fusedsl::hlo
