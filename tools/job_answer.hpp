// job_answer.hpp — a finished job's answer for `uvcl serve`, in the format
// the client asked for, produced piece by piece (http::Responder::stream):
// a large answer is never whole in memory, and formatting it never holds the
// loop for more than one piece.
//
//   JSON (the default): exactly what `uvcl run` prints (job::result_json and
//     a newline), sent chunked since its length is known only once formatted.
//   Accept: application/octet-stream: the one output's bytes as they are in
//     device memory (little-endian), with Content-Length.
//   Accept: multipart/mixed: a JSON part (device and stats) and one
//     application/x-npy part per output (NumPy format 1.0), with
//     Content-Length.
//
// docs/serve.md ("Answers") has the formats and an example.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "program/job_runner.hpp"
#include "program/http/server.hpp"
#include "program/job.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::cli {

enum class AnswerFormat { Json, Octets, MultipartNpy };

// From a request's Accept header (null: none): the first of
// application/octet-stream or multipart/mixed listed; JSON otherwise.
AnswerFormat answer_format(const std::string* accept);

// Refuses a format the job's outputs cannot have, before it runs (406):
// application/octet-stream carries exactly one output.
Result<void> check_answer_format(AnswerFormat format, const job::Job& job);

// The most bytes the answer of `job` can take in `format`: the outputs'
// elements at their longest text (JSON) or their size (binary), with room
// for names, the device and the stats. Saturates at UINT64_MAX.
std::uint64_t answer_bound(AnswerFormat format, const job::Job& job);

// The bytes of the outputs of `job` as the runner holds them until its
// answer was sent: what an answer counts against the server's budget.
std::uint64_t output_bytes(const job::Job& job);

// Refuses a job whose answer could pass `limit` bytes (0: no limit), naming
// its outputs, the bound and the limit (--max-response-bytes).
Result<void> check_answer_size(AnswerFormat format, const job::Job& job, std::uint64_t limit);

// The answer of a job that succeeded. `hold` is kept until the last piece
// was written or the connection closed (the answer budget's reservation).
http::StreamedResponse job_answer(const Engine& engine, job::RunResult result, AnswerFormat format,
                                  std::shared_ptr<void> hold);

}  // namespace uvcl::cli
