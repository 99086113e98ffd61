// bench/idx_file.hpp — reading the bundled data in the hand-written libtorch
// programs (bench/loop/bench_loop_floor.cpp, bench/compare/libtorch_loop.cpp):
// a whole file, gzip or plain, and an IDX file of uint8 values as a tensor.
// Header-only; each program includes it once. Errors are exceptions naming
// the file.
#pragma once

#include <torch/torch.h>
#include <zlib.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

// The whole file, gzip-compressed or plain (gzread reads both).
inline std::vector<unsigned char> read_file(const std::string &path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<unsigned char> buf;
    unsigned char chunk[1 << 16];
    int n;
    while ((n = gzread(f, chunk, sizeof chunk)) > 0) buf.insert(buf.end(), chunk, chunk + n);
    bool bad = n < 0;
    gzclose(f);
    if (bad) throw std::runtime_error(path + ": read error");
    return buf;
}

// An IDX file of uint8 values as a tensor of its header's shape.
inline torch::Tensor read_idx_u8(const std::string &path) {
    std::vector<unsigned char> buf = read_file(path);
    if (buf.size() < 4 || buf[0] != 0 || buf[1] != 0 || buf[2] != 0x08)
        throw std::runtime_error(path + ": not a uint8 IDX file");
    std::vector<int64_t> shape;
    size_t at = 4, count = 1;
    for (int i = 0; i < buf[3]; i++, at += 4) {
        if (buf.size() < at + 4) throw std::runtime_error(path + ": truncated header");
        shape.push_back((int64_t(buf[at]) << 24) | (buf[at + 1] << 16) | (buf[at + 2] << 8) | buf[at + 3]);
        count *= size_t(shape.back());
    }
    if (buf.size() != at + count) throw std::runtime_error(path + ": size does not match its header");
    return torch::from_blob(buf.data() + at, shape, torch::kUInt8).clone();
}

} // namespace bench
