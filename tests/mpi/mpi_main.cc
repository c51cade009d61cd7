// main() of the multi-rank gtest programs (mpi_gtest.h).
#include "mpi_gtest.h"

int main(int argc, char** argv) { return run_gtest_on_every_rank(argc, argv); }
