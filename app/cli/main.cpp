#include <unistd.h>

#include <iostream>

#include "cli.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return remat::cli::runCli(args, std::cout, std::cerr, isatty(STDERR_FILENO) == 1);
}
