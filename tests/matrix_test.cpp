#include <catch2/catch.hpp>

#include "plan/matrix.h"

using pto::MatrixDef;
using pto::MatrixLeg;

TEST_CASE("matrix: product in axis order", "[matrix]") {
  MatrixDef m;
  m.axes = {{"os", {"a", "b"}}, {"py", {"1", "2", "3"}}};
  auto e = pto::expand_matrix(m);
  REQUIRE(e.error.empty());
  REQUIRE(e.legs.size() == 6);
  CHECK(e.legs[0] == MatrixLeg{{"os", "a"}, {"py", "1"}});
  CHECK(e.legs[5] == MatrixLeg{{"os", "b"}, {"py", "3"}});
}

TEST_CASE("matrix: exclude removes partial matches", "[matrix]") {
  MatrixDef m;
  m.axes = {{"os", {"a", "b"}}, {"py", {"1", "2"}}};
  m.exclude = {{{"os", "b"}, {"py", "1"}}, {{"py", "2"}, {"os", "a"}}};
  auto e = pto::expand_matrix(m);
  REQUIRE(e.legs.size() == 2);
  CHECK(e.legs[0] == MatrixLeg{{"os", "a"}, {"py", "1"}});
  CHECK(e.legs[1] == MatrixLeg{{"os", "b"}, {"py", "2"}});
}

TEST_CASE("matrix: include extends matching legs or adds a new one (GitHub semantics)", "[matrix]") {
  MatrixDef m;
  m.axes = {{"fruit", {"apple", "pear"}}, {"animal", {"cat", "dog"}}};
  m.include = {{{"color", "green"}},                       // all legs
               {{"color", "pink"}, {"animal", "cat"}},     // overwrites the added color on cat legs
               {{"fruit", "apple"}, {"shape", "circle"}},  // apple legs
               {{"fruit", "banana"}},                      // no match: a new leg
               {{"fruit", "banana"}, {"animal", "cat"}}};  // matches no original leg: another new leg
  auto e = pto::expand_matrix(m);
  REQUIRE(e.legs.size() == 6);
  CHECK(e.legs[0] == MatrixLeg{{"fruit", "apple"}, {"animal", "cat"}, {"color", "pink"}, {"shape", "circle"}});
  CHECK(e.legs[1] == MatrixLeg{{"fruit", "apple"}, {"animal", "dog"}, {"color", "green"}, {"shape", "circle"}});
  CHECK(e.legs[2] == MatrixLeg{{"fruit", "pear"}, {"animal", "cat"}, {"color", "pink"}});
  CHECK(e.legs[3] == MatrixLeg{{"fruit", "pear"}, {"animal", "dog"}, {"color", "green"}});
  CHECK(e.legs[4] == MatrixLeg{{"fruit", "banana"}});
  CHECK(e.legs[5] == MatrixLeg{{"fruit", "banana"}, {"animal", "cat"}});
}

TEST_CASE("matrix: include-only matrix", "[matrix]") {
  MatrixDef m;
  m.include = {{{"a", "1"}}, {{"a", "2"}}};
  auto e = pto::expand_matrix(m);
  REQUIRE(e.legs.size() == 2);
}

TEST_CASE("matrix: over 256 legs is refused without building them", "[matrix]") {
  MatrixDef m;
  std::vector<std::string> v(1000, "x");
  m.axes = {{"a", v}, {"b", v}, {"c", v}, {"d", v}};  // 10^12 combinations
  auto e = pto::expand_matrix(m);
  CHECK(e.legs.empty());
  CHECK(e.error.find("limit is 256") != std::string::npos);

  MatrixDef ok;
  ok.axes = {{"a", std::vector<std::string>(16, "x")}, {"b", std::vector<std::string>(16, "y")}};
  CHECK(pto::expand_matrix(ok).legs.size() == 256);
  ok.include = {{{"a", "new"}}};
  CHECK_FALSE(pto::expand_matrix(ok).error.empty());
}

TEST_CASE("matrix: leg names and substitution", "[matrix]") {
  MatrixLeg leg{{"platform", "a2a3"}, {"shard", "2"}};
  CHECK(pto::leg_display_name("st", leg) == "st (a2a3, 2)");
  std::string err;
  CHECK(pto::substitute_matrix("pytest -p ${{matrix.platform}} --shard ${{ matrix.shard }}/4", leg, err) ==
        "pytest -p a2a3 --shard 2/4");
  CHECK(err.empty());
  // Other expressions are left for run time (the plan checks them: data_flow_test).
  CHECK(pto::substitute_matrix("${{ steps.a.outputs.v }} ${{ matrix.shard }}", leg, err) == "${{ steps.a.outputs.v }} 2");
  CHECK(err.empty());
  pto::substitute_matrix("${{ matrix.nope }}", leg, err);
  CHECK(err.find("the matrix has no key 'nope'") != std::string::npos);
  err.clear();
  pto::substitute_matrix("echo ${{ matrix.platform", leg, err);
  CHECK(err.find("without a closing") != std::string::npos);
}
