// Every environment variable m3idx reads, in one table (Triton's GetEnv.hpp in role): default,
// whether it changes generated code (then it is part of every cache key), and what it does.
// Reading a name that is not in the table is a programming error caught by env::get.
#pragma once

#include <string>
#include <vector>

namespace m3idx::env {

struct Variable {
  const char *name;
  const char *defaultValue;
  bool changesCode;
  const char *description;
};

const std::vector<Variable> &table();

// The variable's value, or its default when unset or empty. Aborts on a name not in the table.
std::string get(const char *name);
bool flag(const char *name); // "1", "true", "yes", "on" (any case)

// "NAME=value;..." of the variables that change code, in table order: part of every cache key.
std::string codeChangingFingerprint();

} // namespace m3idx::env
