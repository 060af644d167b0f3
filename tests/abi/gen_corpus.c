// Generates the .axe corpus in tests/data/abi: well-formed files and one
// malicious file per loader check, plus expected.txt ("FILE STATUS
// SUBSTRING" per line) that corpus_test.c checks every file against.
// Each malicious file starts from the same valid image, breaks one thing,
// and (unless the point is a wrong hash) recomputes the hashes so that the
// intended check is the one that fires.
//
//   abi-gen-corpus OUT_DIR
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/axe_format.h"
#include "abi/axe_reader.h"
#include "accel/accel.h"

typedef struct image {
  uint8_t *data;
  uint64_t size;
} image_t;

static image_t g_base;
static FILE *g_expected;
static const char *g_dir;

static void die(const char *what) {
  fprintf(stderr, "abi-gen-corpus: %s: %s\n", what, accel_last_error());
  exit(1);
}

static image_t clone_base(void) {
  image_t im = {.data = malloc(g_base.size + 4096), .size = g_base.size};
  memcpy(im.data, g_base.data, g_base.size);
  return im;
}

static axe_header_t *hdr(image_t *im) { return (axe_header_t *)im->data; }
static axe_section_t *sec(image_t *im, uint32_t i) {
  return (axe_section_t *)(im->data + hdr(im)->section_table_offset) + i;
}
static uint32_t find(image_t *im, uint32_t kind) {
  for (uint32_t i = 0; i < hdr(im)->section_count; ++i) {
    if (sec(im, i)->kind == kind) {
      return i;
    }
  }
  fprintf(stderr, "abi-gen-corpus: base lacks section kind %u\n", kind);
  exit(1);
}
static void *rec(image_t *im, uint32_t kind, uint32_t index, size_t size) {
  return im->data + sec(im, find(im, kind))->offset + (uint64_t)index * size;
}
#define KERNEL(im, i) ((axe_kernel_t *)rec(im, AXE_SECTION_KERNELS, i, sizeof(axe_kernel_t)))
#define BINDING(im, i) ((axe_binding_t *)rec(im, AXE_SECTION_BINDINGS, i, sizeof(axe_binding_t)))
#define WEIGHT(im, i) ((axe_weight_t *)rec(im, AXE_SECTION_WEIGHTS, i, sizeof(axe_weight_t)))
#define QUANT(im, i) ((axe_quant_t *)rec(im, AXE_SECTION_QUANT, i, sizeof(axe_quant_t)))

// Recomputes the section hashes (where the section lies in the file) and the
// header hash.
static void rehash(image_t *im) {
  axe_header_t *h = hdr(im);
  uint64_t n = h->section_count;
  uint64_t real = ((const axe_header_t *)g_base.data)->section_count;
  for (uint64_t i = 0; i < n && i < real; ++i) {
    axe_section_t *s = sec(im, (uint32_t)i);
    if (s->offset <= im->size && s->size <= im->size - s->offset) {
      accel_axe_hash128(im->data + s->offset, s->size, s->hash);
    }
  }
  // A reader hashes the table the header claims, which must fit the file
  // for the hash to be checked at all; hash what exists.
  h->header_hash = accel_axe_header_hash(
      h, sec(im, 0), (n < real ? n : real) * AXE_SECTION_ENTRY_SIZE);
}

static void emit(const char *name, image_t *im, const char *status,
                 const char *substring) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s.axe", g_dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(im->data, 1, im->size, f) != im->size) {
    fprintf(stderr, "abi-gen-corpus: cannot write %s: %s\n", path,
            strerror(errno));
    exit(1);
  }
  fclose(f);
  fprintf(g_expected, "%s.axe %s %s\n", name, status, substring);
  free(im->data);
}

static void build_base(void) {
  accel_exe_builder_t *b;
  if (accel_exe_builder_create(&b) != ACCEL_OK) {
    die("builder");
  }
  static const uint8_t uuid[16] = {0x41, 0x58, 0x45, 0x00, 0xc0, 0x7b,
                                   0x40, 0x00, 0x80, 0x00, 1, 2, 3, 4, 5, 6};
  accel_exe_builder_set_uuid(b, uuid);
  accel_exe_requirements_t req = {.struct_size = sizeof(req),
                                  .workspace_bytes = 4096};
  accel_exe_builder_set_requirements(b, &req);
  accel_kernel_binding_decl_t binds[3] = {
      {.name = "a", .access = ACCEL_KERNEL_ACCESS_READ, .min_size_bytes = 4},
      {.name = "b", .access = ACCEL_KERNEL_ACCESS_READ, .min_size_bytes = 4},
      {.name = "out", .access = ACCEL_KERNEL_ACCESS_WRITE, .min_size_bytes = 4},
  };
  accel_exe_kernel_desc_t k = {.struct_size = sizeof(k), .name = "vector_add",
                               .binding_count = 3, .bindings = binds,
                               .constants_size = 4,
                               .workgroup_size = {256, 1, 1}};
  accel_exe_kernel_desc_t k2 = {.struct_size = sizeof(k2), .name = "empty"};
  static const uint8_t fake_elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  static char long_text[301];
  memset(long_text, 'd', 300);
  static float w[64], scale[4];
  static int8_t q[64];
  for (int i = 0; i < 64; ++i) {
    w[i] = (float)i;
    q[i] = (int8_t)i;
  }
  accel_exe_weight_desc_t wd = {.struct_size = sizeof(wd), .mappable = 1};
  wd.info = (accel_weight_info_t){.struct_size = sizeof(wd.info), .name = "w",
                                  .dtype = ACCEL_DTYPE_F32, .rank = 2,
                                  .shape = {8, 8}, .host_data = w,
                                  .size_bytes = sizeof(w)};
  accel_exe_weight_desc_t qd = {.struct_size = sizeof(qd)};
  qd.info = (accel_weight_info_t){.struct_size = sizeof(qd.info), .name = "q",
                                  .dtype = ACCEL_DTYPE_I8, .rank = 2,
                                  .shape = {4, 16}, .host_data = q,
                                  .size_bytes = sizeof(q),
                                  .quant_scheme = ACCEL_QUANT_PER_CHANNEL,
                                  .quant_axis = 0, .quant_scale = "q.scale"};
  accel_exe_weight_desc_t sd = {.struct_size = sizeof(sd)};
  sd.info = (accel_weight_info_t){.struct_size = sizeof(sd.info),
                                  .name = "q.scale", .dtype = ACCEL_DTYPE_F32,
                                  .rank = 1, .shape = {4}, .host_data = scale,
                                  .size_bytes = sizeof(scale)};
  if (accel_exe_builder_add_kernel(b, &k) != ACCEL_OK ||
      accel_exe_builder_add_kernel(b, &k2) != ACCEL_OK ||
      accel_exe_builder_add_code(b, "host-x86_64", ACCEL_CODE_FORMAT_ELF_SO,
                                 fake_elf, sizeof(fake_elf)) != ACCEL_OK ||
      accel_exe_builder_add_weight(b, &wd) != ACCEL_OK ||
      accel_exe_builder_add_weight(b, &qd) != ACCEL_OK ||
      accel_exe_builder_add_weight(b, &sd) != ACCEL_OK ||
      accel_exe_builder_add_metadata(b, "model", "corpus base") != ACCEL_OK ||
      accel_exe_builder_add_metadata(b, "description", long_text) !=
          ACCEL_OK) {
    die("building the base image");
  }
  void *data;
  if (accel_exe_builder_write_memory(b, &data, &g_base.size) != ACCEL_OK) {
    die("writing the base image");
  }
  g_base.data = data;
  accel_exe_builder_destroy(b);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: abi-gen-corpus OUT_DIR\n");
    return 2;
  }
  g_dir = argv[1];
  char path[4096];
  snprintf(path, sizeof(path), "%s/expected.txt", g_dir);
  g_expected = fopen(path, "w");
  if (g_expected == NULL) {
    fprintf(stderr, "abi-gen-corpus: cannot write %s\n", path);
    return 1;
  }
  fprintf(g_expected,
          "# Generated by abi-gen-corpus (tests/abi/gen_corpus.c): FILE "
          "STATUS MESSAGE-SUBSTRING\n");
  build_base();
  image_t im;

  im = clone_base();
  emit("valid_base", &im, "ACCEL_OK", "-");

  {  // An optional section of a kind from the future is skipped.
    static const uint8_t uuid2[16] = {7, 7, 7, 7, 7, 7, 0x47, 7,
                                      0x87, 7, 7, 7, 7, 7, 7, 7};
    accel_exe_builder_t *b;
    accel_exe_builder_create(&b);
    accel_exe_builder_set_uuid(b, uuid2);
    static const char extra[] = "future data";
    accel_exe_builder_add_raw_section(b, 200, 0, extra, sizeof(extra));
    accel_exe_builder_add_metadata(b, "k", "v");
    void *d;
    accel_exe_builder_write_memory(b, &d, &im.size);
    im.data = d;
    emit("valid_unknown_optional_section", &im, "ACCEL_OK", "-");
    accel_exe_builder_destroy(b);
    accel_exe_builder_create(&b);
    accel_exe_builder_set_uuid(b, uuid2);
    accel_exe_builder_add_raw_section(b, 200, 1, extra, sizeof(extra));
    accel_exe_builder_write_memory(b, &d, &im.size);
    im.data = d;
    emit("unknown_required_section", &im, "ACCEL_ERROR_VERSION",
         "unknown kind 200 is marked required");
    accel_exe_builder_destroy(b);
  }

  im = clone_base();
  im.size = 0;
  emit("empty_file", &im, "ACCEL_ERROR_FORMAT", "file is truncated");

  im = clone_base();
  im.size = 100;
  emit("truncated_header", &im, "ACCEL_ERROR_FORMAT", "file is truncated");

  im = clone_base();
  im.size -= 100;
  emit("truncated_file", &im, "ACCEL_ERROR_FORMAT", "header field file_size");

  im = clone_base();
  im.data[1] = 'X';
  emit("bad_magic", &im, "ACCEL_ERROR_FORMAT", "header field magic");

  im = clone_base();
  hdr(&im)->version_major = 2;
  rehash(&im);
  emit("newer_major", &im, "ACCEL_ERROR_VERSION", "header field version_major");

  im = clone_base();
  hdr(&im)->version_minor = 7;
  rehash(&im);
  emit("valid_newer_minor", &im, "ACCEL_OK", "-");

  im = clone_base();
  hdr(&im)->required_features = 1u << 5;
  rehash(&im);
  emit("unknown_required_feature", &im, "ACCEL_ERROR_VERSION",
       "required_features");

  im = clone_base();
  hdr(&im)->uuid[3] ^= 0xff;
  emit("bad_header_hash", &im, "ACCEL_ERROR_FORMAT", "header_hash");

  im = clone_base();
  hdr(&im)->section_count = 3000000000u;
  rehash(&im);
  emit("section_count_billions", &im, "ACCEL_ERROR_FORMAT",
       "header field section_count");

  im = clone_base();
  {
    axe_header_t *h = hdr(&im);
    uint64_t n = h->section_count;
    uint64_t t = h->section_table_offset;
    h->section_table_offset = UINT64_MAX - 63;
    // The table did not move; hash what a reader would try (it must fail
    // before reading it).
    h->header_hash =
        accel_axe_header_hash(h, im.data + t, n * AXE_SECTION_ENTRY_SIZE);
  }
  emit("table_offset_overflow", &im, "ACCEL_ERROR_FORMAT",
       "header field section_table_offset");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_KERNELS))->offset = UINT64_MAX - 8;
  rehash(&im);
  emit("section_offset_overflow", &im, "ACCEL_ERROR_FORMAT",
       "(kernels) field size");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_WEIGHT_DATA))->size = UINT64_MAX;
  rehash(&im);
  emit("section_size_overflow", &im, "ACCEL_ERROR_FORMAT",
       "(weight_data) field size");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_METADATA))->offset =
      sec(&im, find(&im, AXE_SECTION_KERNELS))->offset;
  rehash(&im);
  emit("overlapping_sections", &im, "ACCEL_ERROR_FORMAT", "overlaps section");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_STRINGS))->offset = 64;
  rehash(&im);
  emit("section_over_header", &im, "ACCEL_ERROR_FORMAT",
       "overlaps the header or the section table");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_KERNELS))->offset += 4;
  rehash(&im);
  emit("misaligned_section", &im, "ACCEL_ERROR_FORMAT",
       "is not a multiple of the section's alignment");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_KERNELS))->alignment = 12;
  rehash(&im);
  emit("alignment_not_power_of_two", &im, "ACCEL_ERROR_FORMAT",
       "is not a power of two");

  im = clone_base();
  WEIGHT(&im, 1)->data_offset += 8;
  rehash(&im);
  emit("misaligned_weight", &im, "ACCEL_ERROR_FORMAT", "is not 64-byte aligned");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_WEIGHT_DATA))->alignment = 64;
  rehash(&im);
  emit("mappable_weights_not_page_aligned", &im, "ACCEL_ERROR_FORMAT",
       "for a mappable section");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_KERNELS))->count = 2000000000u;
  rehash(&im);
  emit("record_count_billions", &im, "ACCEL_ERROR_FORMAT",
       "(kernels) field count");

  im = clone_base();
  {
    axe_section_t *s = sec(&im, find(&im, AXE_SECTION_STRINGS));
    im.data[s->offset + s->size - 1] = 'x';
  }
  rehash(&im);
  emit("strings_without_terminator", &im, "ACCEL_ERROR_FORMAT",
       "must start and end with a NUL byte");

  im = clone_base();
  KERNEL(&im, 0)->name = 0x00ffffff;
  rehash(&im);
  emit("string_offset_out_of_range", &im, "ACCEL_ERROR_FORMAT",
       "kernel 0 field name: string offset 16777215 is beyond");

  im = clone_base();
  {
    // A name that runs for more than 255 bytes before its NUL.
    axe_section_t *s = sec(&im, find(&im, AXE_SECTION_STRINGS));
    memset(im.data + s->offset + 1, 'n', s->size - 2);
    KERNEL(&im, 0)->name = 1;
  }
  rehash(&im);
  emit("name_too_long", &im, "ACCEL_ERROR_FORMAT", "is longer than 255 bytes");

  im = clone_base();
  KERNEL(&im, 0)->name = 0;
  rehash(&im);
  emit("empty_kernel_name", &im, "ACCEL_ERROR_FORMAT",
       "kernel 0 field name: name is empty");

  im = clone_base();
  KERNEL(&im, 0)->binding_first = 1000;
  rehash(&im);
  emit("dangling_binding", &im, "ACCEL_ERROR_FORMAT",
       "kernel 0 field binding_first");

  im = clone_base();
  KERNEL(&im, 0)->binding_first = 0xffffffffu;
  rehash(&im);
  emit("binding_index_overflow", &im, "ACCEL_ERROR_FORMAT",
       "kernel 0 field binding_first");

  im = clone_base();
  WEIGHT(&im, 0)->data_section = 99;
  rehash(&im);
  emit("dangling_weight_section", &im, "ACCEL_ERROR_FORMAT",
       "field data_section: 99");

  im = clone_base();
  WEIGHT(&im, 0)->data_section = find(&im, AXE_SECTION_STRINGS);
  rehash(&im);
  emit("weight_section_wrong_kind", &im, "ACCEL_ERROR_FORMAT",
       "is not a weight_data section");

  im = clone_base();
  WEIGHT(&im, 0)->data_offset = UINT64_MAX - 63;
  rehash(&im);
  emit("weight_offset_overflow", &im, "ACCEL_ERROR_FORMAT",
       "field data_offset");

  im = clone_base();
  WEIGHT(&im, 0)->quant = 50;
  rehash(&im);
  emit("dangling_quant", &im, "ACCEL_ERROR_FORMAT", "field quant: 50 dangles");

  im = clone_base();
  QUANT(&im, 0)->scale = 1;  // weight "q" is its own scale
  rehash(&im);
  emit("quant_cycle_self", &im, "ACCEL_ERROR_FORMAT", "refers to itself");

  im = clone_base();
  WEIGHT(&im, 2)->quant = 0;  // the scale is quantized by itself's user
  rehash(&im);
  emit("quant_cycle_pair", &im, "ACCEL_ERROR_FORMAT", "chains and cycles");

  im = clone_base();
  QUANT(&im, 0)->scale = 77;
  rehash(&im);
  emit("dangling_quant_scale", &im, "ACCEL_ERROR_FORMAT",
       "quant 0 field scale: weight 77 dangles");

  im = clone_base();
  WEIGHT(&im, 0)->shape[0] = 1ull << 40;
  WEIGHT(&im, 0)->shape[1] = 1ull << 40;
  rehash(&im);
  emit("shape_overflow", &im, "ACCEL_ERROR_FORMAT", "overflows 64 bits");

  im = clone_base();
  WEIGHT(&im, 0)->rank = 9;
  rehash(&im);
  emit("rank_too_large", &im, "ACCEL_ERROR_FORMAT", "rank above 8");

  im = clone_base();
  WEIGHT(&im, 0)->dtype = 99;
  rehash(&im);
  emit("unknown_dtype", &im, "ACCEL_ERROR_FORMAT", "unknown dtype");

  im = clone_base();
  WEIGHT(&im, 0)->size_bytes += 64;
  rehash(&im);
  emit("weight_size_mismatch", &im, "ACCEL_ERROR_FORMAT", "field size_bytes");

  im = clone_base();
  im.data[sec(&im, find(&im, AXE_SECTION_WEIGHT_DATA))->offset + 5] ^= 0x40;
  emit("wrong_section_hash", &im, "ACCEL_ERROR_FORMAT",
       "(weight_data) field hash: content hash mismatch");

  im = clone_base();
  KERNEL(&im, 0)->abi_version = 2u << 16;
  rehash(&im);
  emit("newer_kernel_abi", &im, "ACCEL_ERROR_VERSION",
       "kernel 0 field abi_version");

  im = clone_base();
  KERNEL(&im, 0)->flags = 0x80000001u;
  rehash(&im);
  emit("kernel_flags_set", &im, "ACCEL_ERROR_FORMAT",
       "kernel 0 field flags: reserved bits 0x80000001");

  im = clone_base();
  KERNEL(&im, 1)->name = KERNEL(&im, 0)->name;
  rehash(&im);
  emit("duplicate_kernel_name", &im, "ACCEL_ERROR_FORMAT",
       "kernel name \"vector_add\" appears twice");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_METADATA))->kind = AXE_SECTION_STRINGS;
  rehash(&im);
  emit("duplicate_strings_section", &im, "ACCEL_ERROR_FORMAT",
       "second strings section");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_REQUIREMENTS))->kind = 300;
  sec(&im, find(&im, 300))->flags = 0;
  rehash(&im);
  emit("missing_requirements", &im, "ACCEL_ERROR_FORMAT",
       "no requirements section");

  im = clone_base();
  BINDING(&im, 0)->access = 0;
  rehash(&im);
  emit("binding_without_access", &im, "ACCEL_ERROR_FORMAT",
       "binding 0 field access");

  im = clone_base();
  KERNEL(&im, 0)->workgroup_size[1] = 0;
  rehash(&im);
  emit("zero_workgroup_size", &im, "ACCEL_ERROR_FORMAT",
       "field workgroup_size");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_KERNELS))->layout_major = 2;
  rehash(&im);
  emit("newer_table_layout", &im, "ACCEL_ERROR_VERSION",
       "(kernels) field layout_major");

  // A CODE section built against another kernel ABI major (or a newer
  // minor) cannot be called: its layout version is the kernel ABI's.
  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_CODE))->layout_major = 2;
  rehash(&im);
  emit("code_newer_abi_major", &im, "ACCEL_ERROR_VERSION",
       "(code) field layout_major");
  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_CODE))->layout_minor = 99;
  rehash(&im);
  emit("code_newer_abi_minor", &im, "ACCEL_ERROR_VERSION",
       "(code) field layout_minor");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_KERNELS))->flags |= 1u << 9;
  rehash(&im);
  emit("reserved_section_flags", &im, "ACCEL_ERROR_FORMAT",
       "reserved bits 0x201");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_CODE))->name = 0;
  rehash(&im);
  emit("code_without_target", &im, "ACCEL_ERROR_FORMAT",
       "a code object must name its target");

  im = clone_base();
  sec(&im, find(&im, AXE_SECTION_CODE))->info = 9;
  rehash(&im);
  emit("unknown_code_format", &im, "ACCEL_ERROR_FORMAT",
       "unknown code format 9");

  im = clone_base();
  QUANT(&im, 0)->axis = 5;
  rehash(&im);
  emit("quant_axis_out_of_range", &im, "ACCEL_ERROR_FORMAT",
       "quant 0 field axis");

  im = clone_base();
  WEIGHT(&im, 2)->shape[0] = 2;
  WEIGHT(&im, 2)->size_bytes = 8;
  rehash(&im);
  emit("quant_scale_wrong_count", &im, "ACCEL_ERROR_FORMAT",
       "has 2 elements, the scheme needs 4");

  fclose(g_expected);
  free(g_base.data);
  return 0;
}
