// NCCL results become Statuses that name the call, NCCL's code and text, and the place.

#include "collectives/nccl/nccl_status.h"

#include <gtest/gtest.h>

namespace chorus {
namespace {

TEST(NcclStatus, SuccessIsOk) { EXPECT_TRUE(nccl_status(0, "ncclAllReduce", "", "f.cc", 1).ok()); }

TEST(NcclStatus, InvalidArgumentAndUsageAreTheCallersFault) {
  for (int code : {4, 5}) {
    Status s = nccl_status(code, "ncclAllReduce(buf, buf, 10, 99, ...)", "invalid data type",
                           "nccl_backend.cc", 42);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << code;
    EXPECT_NE(s.message().find("ncclAllReduce(buf"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("NCCL code " + std::to_string(code)), std::string::npos);
    EXPECT_NE(s.message().find("invalid data type"), std::string::npos);
    EXPECT_NE(s.message().find("nccl_backend.cc:42"), std::string::npos);
  }
}

TEST(NcclStatus, EverythingElseIsInternal) {
  for (int code : {1, 2, 3, 6, 7, 1234}) {
    Status s = nccl_status(code, "ncclCommInitRank", "", "x.cc", 7);
    EXPECT_EQ(s.code(), StatusCode::kInternal) << code;
    EXPECT_NE(s.message().find(nccl_code_name(code)), std::string::npos) << s.message();
  }
  EXPECT_STREQ(nccl_code_name(1234), "unknown NCCL result");
  EXPECT_NE(std::string(nccl_code_name(6)).find("peer"), std::string::npos);
}

TEST(NcclStatus, AsyncErrorNamesTheSetAndTheOperation) {
  EXPECT_TRUE(nccl_async_status(0, "global", "allreduce 'w'", "").ok());
  Status s = nccl_async_status(6, "set 3", "allreduce 'grad.fc1'", "peer 2 is gone");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("set 3"), std::string::npos);
  EXPECT_NE(s.message().find("allreduce 'grad.fc1'"), std::string::npos);
  EXPECT_NE(s.message().find("peer 2 is gone"), std::string::npos);
  EXPECT_NE(s.message().find("aborted"), std::string::npos);
}

}  // namespace
}  // namespace chorus
