#pragma once
// Header-only or compiled mode, as Boost.Asio's separate compilation does it.
//
// Header-only (the default): every function is defined in the headers; a program includes them and
// links nothing of fusedsl's.
//
// Compiled (FUSEDSL_SEPARATE_COMPILATION defined, which linking the CMake target fusedsl::compiled
// does): the code that does not depend on the user's program, the HLO IR's verifier, printer and
// parser, the StableHLO writer, the exporter's core over a graph_view, the TPU-style backend
// (scheduler, simulation, cost report, executor) and the CPU executor's program-independent part
// (binding by name, values of any dtype as f32, packed-weight storage, executor_base), is declared
// in the headers and defined once, in the library fusedsl::compiled (src/). A translation unit
// then parses declarations instead of those bodies and generates none of their code. Every unit
// of a program must use the same mode.
//
// The bodies live in impl/*.ipp beside their headers; a header includes its .ipp at its end in
// header-only mode, and src/*.cpp include them in the compiled mode's library. FUSEDSL_DECL marks
// the functions declared so: `inline` in header-only mode, nothing in the compiled mode.
#if defined(FUSEDSL_SEPARATE_COMPILATION)
#define FUSEDSL_DECL
#else
#define FUSEDSL_HEADER_ONLY 1
#define FUSEDSL_DECL inline
#endif
