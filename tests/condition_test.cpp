#include <catch2/catch.hpp>

#include "plan/condition.h"

using pto::Condition;
using pto::ConditionContext;

namespace {
bool eval(const std::string& text, bool failed, bool cancelled = false, std::map<std::string, std::string> matrix = {}) {
  std::string err;
  auto c = Condition::parse(text, err);
  INFO(text << ": " << err);
  REQUIRE(c);
  ConditionContext ctx;
  ctx.any_failed = failed;
  ctx.cancelled = cancelled;
  ctx.matrix = matrix;
  return c->evaluate(ctx);
}
}  // namespace

TEST_CASE("if: status functions follow GitHub Actions", "[condition]") {
  CHECK(eval("success()", false));
  CHECK_FALSE(eval("success()", true));
  CHECK(eval("failure()", true));
  CHECK_FALSE(eval("failure()", false));
  CHECK(eval("always()", true));
  CHECK(eval("always()", true, true));
  CHECK(eval("cancelled()", false, true));
  CHECK_FALSE(eval("!cancelled()", false, true));
  CHECK(eval("!cancelled()", true));
  CHECK(eval("${{ failure() || cancelled() }}", true));
}

TEST_CASE("if: without a status function, success() is implied", "[condition]") {
  CHECK(eval("matrix.os == 'linux'", false, false, {{"os", "Linux"}}));  // case-insensitive like GitHub
  CHECK_FALSE(eval("matrix.os == 'linux'", true, false, {{"os", "linux"}}));
  CHECK(eval("always() && matrix.os != 'mac'", true, false, {{"os", "linux"}}));
  CHECK(eval("true", false));
  CHECK_FALSE(eval("false", false));
  CHECK(eval("(matrix.a == '1' || matrix.a == '2') && !(matrix.b == 'x')", false, false, {{"a", "2"}, {"b", "y"}}));
}

TEST_CASE("if: errors name the problem and its column", "[condition]") {
  std::string err;
  int col = 0;
  CHECK_FALSE(Condition::parse("success() && github.ref == 'x'", err, &col));
  CHECK(err.find("unsupported 'github.ref'") != std::string::npos);
  CHECK(col == 14);
  CHECK_FALSE(Condition::parse("success(", err));
  CHECK_FALSE(Condition::parse("'open", err));
  CHECK(err == "unterminated string");
  CHECK_FALSE(Condition::parse("", err));
  CHECK_FALSE(Condition::parse(std::string(10000, '('), err));  // bounded nesting, no stack overflow
  CHECK_FALSE(Condition::parse(std::string(10000, '!') + "true", err));
}
