// GitHub Actions data flow with GitHub's semantics: $GITHUB_ENV, $GITHUB_PATH, $GITHUB_OUTPUT (the one-line
// and the NAME<<DELIMITER forms), step ids, steps.*/env.*/needs.* expressions, job outputs; and load errors
// for what cannot exist.
#include <catch2/catch.hpp>

#include "engine/file_commands.h"
#include "plan/expression.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

TEST_CASE("file commands: one-line and multi-line values, = in values, malformed files", "[dataflow]") {
  NameValues out;
  std::string err;
  REQUIRE(parse_name_value_file("A=1\n\nB=x=y\nC<<EOF\nline one\nline=two\nEOF\nD<<E\r\n\r\nE\r\n", out, err));
  REQUIRE(out.size() == 4);
  CHECK(out[0] == std::make_pair(std::string("A"), std::string("1")));
  CHECK(out[1].second == "x=y");
  CHECK(out[2].second == "line one\nline=two");
  CHECK(out[3].second == "");
  NameValues bad;
  CHECK_FALSE(parse_name_value_file("A=1\nC<<EOF\nnever closed\n", bad, err));
  CHECK(err == "line 2: no line 'EOF' closes the value of C");
  CHECK_FALSE(parse_name_value_file("just text\n", bad, err));
  CHECK(err == "line 1: expected NAME=value or NAME<<DELIMITER, got: just text");
  CHECK(parse_path_file("/a\n\n/b\n") == std::vector<std::string>{"/a", "/b"});
}

TEST_CASE("expressions: values, || defaults, and what each place may read", "[dataflow]") {
  ConditionContext ctx;
  ctx.values["steps.a.outputs.v"] = "1.2";
  ctx.env["E"] = "e";
  CHECK(interpolate("v=${{ steps.a.outputs.v }} e=${{env.E}} d=${{ steps.a.outputs.none || 'dflt' }}", ctx) == "v=1.2 e=e d=dflt");
  ExpressionScope scope;
  scope.job = "j";
  scope.step_ids = {"build"};
  scope.needs_outputs["prep"] = {"version"};
  CHECK(check_expressions("${{ steps.build.outputs.x }} ${{ needs.prep.outputs.version }} ${{ env.X }}", scope) == "");
  CHECK(check_expressions("${{ steps.biuld.outputs.x }}", scope) ==
        "${{ steps.biuld.outputs.x }}: 'steps.biuld.outputs.x': no earlier step of job 'j' has id 'biuld'; did you mean 'build'?");
  CHECK(check_expressions("${{ needs.prep.outputs.other }}", scope) ==
        "${{ needs.prep.outputs.other }}: 'needs.prep.outputs.other': job 'prep' declares no output 'other' (outputs: version)");
  CHECK(check_expressions("${{ needs.other.result }}", scope).find("does not need 'other'") != std::string::npos);
  CHECK(check_expressions("${{ github.sha }}", scope).find("unsupported 'github.sha'") != std::string::npos);
  CHECK(check_expressions("${{ steps.build }}", scope).find("use steps.ID.outputs.NAME") != std::string::npos);
}

namespace {

struct DataFlowProject {
  TempDir dir;
  CommandResult run(std::map<std::string, std::string> env = {}) const {
    env["OUT"] = (dir.path() / "out").string();
    fs::create_directories(dir.path() / "out");
    return run_cli({"run", "--root", dir.str(), "--lock-dir", (dir.path() / "locks").string(), "--state-dir",
                    (dir.path() / "state").string()}, env);
  }
  std::string out(const std::string& name) const { return read_file(dir.path() / "out" / name); }
};

}  // namespace

TEST_CASE("run: $GITHUB_ENV, $GITHUB_PATH, $GITHUB_OUTPUT, step and job outputs flow as in GitHub", "[dataflow]") {
  DataFlowProject p;
  write_project(p.dir, {
      {"producer.yml", R"Y(name: producer
outputs:
  version: ${{ steps.make.outputs.version }}
  notes: ${{ steps.make.outputs.notes }}
env: {FROM_JOB: job}
steps:
  - id: make
    run: |
      echo "version=1.2=3" >> "$GITHUB_OUTPUT"
      { echo "notes<<EOF"; echo "line one"; echo "line=two"; echo "EOF"; } >> "$GITHUB_OUTPUT"
      echo "GREETING=hello world" >> "$GITHUB_ENV"
      echo "FROM_JOB=overridden" >> "$GITHUB_ENV"
      { echo "MULTI<<END"; echo "a=1"; echo "b"; echo "END"; } >> "$GITHUB_ENV"
      mkdir -p tools && printf '#!/bin/sh\necho tool-ran\n' > tools/mytool && chmod +x tools/mytool
      echo "$PWD/tools" >> "$GITHUB_PATH"
      test -z "$GREETING"
  - name: use ${{ steps.make.outputs.version }}
    id: use
    env: {V: "${{ steps.make.outputs.version }}"}
    if: steps.make.outputs.version == '1.2=3' && steps.make.outcome == 'success'
    run: |
      echo "V=$V GREETING=$GREETING FROM_JOB=$FROM_JOB" > "$OUT/use"
      printf '%s' "$MULTI" > "$OUT/multi"
      mytool >> "$OUT/use"
      echo '${{ env.GREETING }}' >> "$OUT/use"
  - if: steps.make.outputs.version == 'nope'
    run: touch "$OUT/skipped-ran"
)Y"},
      {"consumer.yml", R"Y(name: consumer
needs: [producer]
env: {NV: "${{ needs.producer.outputs.version }}"}
if: needs.producer.result == 'success'
steps:
  - working-directory: ${{ needs.producer.outputs.version == '1.2=3' && 'sub' || 'elsewhere' }}
    run: |
      mkdir -p "$OUT" && echo "$NV $(basename "$PWD")" > "$OUT/consumer"
      printf '%s' '${{ needs.producer.outputs.notes }}' > "$OUT/notes"
)Y"}});
  fs::create_directories(p.dir.path() / "sub");
  CommandResult r = p.run();
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Later steps see $GITHUB_ENV (the job's own env wins over it, as in GitHub) and $GITHUB_PATH.
  CHECK(p.out("use") == "V=1.2=3 GREETING=hello world FROM_JOB=job\ntool-ran\nhello world\n");
  CHECK(p.out("multi") == "a=1\nb");
  CHECK(r.out.find("producer / use 1.2=3: succeeded") != std::string::npos);  // name: ${{ }} at start
  CHECK_FALSE(fs::exists(p.dir.path() / "out/skipped-ran"));
  // Job outputs reach dependants: env, if:, working-directory, run.
  CHECK(p.out("consumer") == "1.2=3 sub\n");
  CHECK(p.out("notes") == "line one\nline=two");
}

TEST_CASE("run: steps, needs and env contexts in each step field GitHub allows them in: run, if, name, working-directory", "[dataflow]") {
  DataFlowProject p;
  write_project(p.dir, {
      {"prod.yml", R"Y(name: prod
outputs: {dir: "${{ steps.o.outputs.dir }}"}
steps:
  - id: o
    run: |
      echo "dir=sub" >> "$GITHUB_OUTPUT"
      echo "WHERE=sub" >> "$GITHUB_ENV"
  - name: in ${{ steps.o.outputs.dir }} and ${{ env.WHERE }}
    if: env.WHERE == 'sub' && steps.o.outputs.dir == 'sub'
    working-directory: ${{ steps.o.outputs.dir }}
    run: echo "${{ steps.o.outputs.dir }} $(basename "$PWD")" > "$OUT/steps"
  - working-directory: ${{ env.WHERE }}
    run: basename "$PWD" > "$OUT/envwd"
  - if: env.WHERE == 'elsewhere'
    run: touch "$OUT/env-if-ran"
)Y"},
      {"cons.yml", R"Y(name: cons
needs: [prod]
steps:
  - name: after ${{ needs.prod.outputs.dir }}
    if: needs.prod.outputs.dir == 'sub'
    run: echo "${{ needs.prod.outputs.dir }}" > "$OUT/needs"
  - if: needs.prod.outputs.dir != 'sub'
    run: touch "$OUT/needs-if-ran"
)Y"}});
  fs::create_directories(p.dir.path() / "sub");
  CommandResult r = p.run();
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(p.out("steps") == "sub sub\n");                                        // steps.* in run and working-directory
  CHECK(r.out.find("prod / in sub and sub: succeeded") != std::string::npos);  // steps.* and env.* in name; both in if
  CHECK(p.out("envwd") == "sub\n");                                           // env.* in working-directory
  CHECK_FALSE(fs::exists(p.dir.path() / "out/env-if-ran"));                   // env.* in if, false
  CHECK(r.out.find("cons / after sub: succeeded") != std::string::npos);      // needs.* in name and if
  CHECK(p.out("needs") == "sub\n");
  CHECK_FALSE(fs::exists(p.dir.path() / "out/needs-if-ran"));
}

TEST_CASE("run: a malformed $GITHUB_OUTPUT fails its step with the line", "[dataflow]") {
  DataFlowProject p;
  write_project(p.dir, {{"bad.yml", "name: bad\nsteps:\n  - run: 'echo \"x<<EOF\" >> \"$GITHUB_OUTPUT\"; echo never closed >> \"$GITHUB_OUTPUT\"'\n"}});
  CommandResult r = p.run();
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("$GITHUB_OUTPUT line 1: no line 'EOF' closes the value of x") != std::string::npos);
}

TEST_CASE("load: expressions that read what cannot exist are errors at their place", "[dataflow]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\noutputs: {v: '${{ steps.one.outputs.v }}'}\nsteps:\n"
                              "  - {id: one, run: 'true'}\n"
                              "  - {run: 'echo ${{ steps.two.outputs.x }}'}\n"
                              "  - {id: two, run: 'echo ${{ github.sha }}'}\n"},
                    {"b.yml", "name: b\nneeds: [a]\nenv: {X: '${{ needs.a.outputs.w }}'}\nsteps:\n"
                              "  - {run: 'echo ${{ needs.c.outputs.v }}'}\n"
                              "  - {id: one, run: 'true'}\n  - {id: one, run: 'true'}\n"},
                    {"p.yml", "name: p\nparallel: true\nsteps:\n  - {id: x, run: 'true'}\n"
                              "  - {run: 'echo ${{ steps.x.outputs.v }}'}\n"
                              "  - {if: always(), run: 'echo ${{ steps.x.outputs.v }}'}\n"}});
  CommandResult r = run_cli({"--root", d.str(), "lint"});
  INFO(r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("jobs/a.yml:5:11: error: run: ${{ steps.two.outputs.x }}: 'steps.two.outputs.x': no earlier step of job 'a' has id 'two'") != std::string::npos);
  CHECK(r.out.find("jobs/a.yml:6:20: error: run: ${{ github.sha }}: unsupported 'github.sha'") != std::string::npos);
  CHECK(r.out.find("jobs/b.yml:3:6: error: env.X: ${{ needs.a.outputs.w }}: 'needs.a.outputs.w': job 'a' declares no output 'w' (outputs: v)") != std::string::npos);
  CHECK(r.out.find("jobs/b.yml:5:11: error: run: ${{ needs.c.outputs.v }}: 'needs.c.outputs.v': job 'b' does not need 'c'") != std::string::npos);
  CHECK(r.out.find("jobs/b.yml:7:10: error: step id 'one' is also used on line 6 [duplicate-key]") != std::string::npos);
  CHECK(r.out.find("jobs/p.yml:5:11: error: run: ${{ steps.x.outputs.v }}: 'steps.x.outputs.v': in a parallel job the plain steps run at once") != std::string::npos);
  CHECK(r.out.find("jobs/p.yml:6:") == std::string::npos);  // the cleanup step may read it
}

TEST_CASE("load: a bad expression in a step's name, working-directory or env is reported at that value's line", "[dataflow]") {
  TempDir d;
  write_project(d, {{"w.yml", "name: w\nsteps:\n  - run: 'true'\n"
                              "    name: 'step ${{ steps.nope.outputs.n }}'\n"
                              "    env:\n      A: ok\n      B: '${{ needs.x.outputs.y }}'\n"
                              "    working-directory: '${{ env.MISSING_CONTEXT.x }}'\n"}});
  CommandResult r = run_cli({"--root", d.str(), "lint"});
  INFO(r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("jobs/w.yml:4:11: error: name: ") != std::string::npos);
  CHECK(r.out.find("jobs/w.yml:7:10: error: env.B: ") != std::string::npos);
  CHECK(r.out.find("jobs/w.yml:8:24: error: working-directory: ") != std::string::npos);
}
