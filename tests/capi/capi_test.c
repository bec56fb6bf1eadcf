/* The host C API from C: open the registry on the build's plugins, list them, select
 * configs/default.yaml, prepare a small bf16 layer with the reference, route and run it, and
 * compare with the C++ API's results for the same inputs (bit for bit: the same plugin); then
 * every bad-input path returns its status and a message naming the problem; a layer loaded from
 * a checkpoint runs like the same weights passed directly.
 *   moe_capi_test CASE|all PLUGIN_DIR SOURCE_DIR EXPECTED_FILE EXAMPLE_PLUGIN SCRATCH_DIR */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "capi_checkpoint.h"
#include "capi_inputs.h"
#include "moe/host/moe_host.h"

static int g_failures = 0;
static const char* g_plugin_dir;
static const char* g_source_dir;
static const char* g_expected_file;
static const char* g_example_plugin;
static const char* g_scratch_dir;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)

#define CHECK_OK(call)                                                                \
  do {                                                                                \
    const moe_status s_ = (call);                                                     \
    CHECK(s_ == MOE_STATUS_OK, "%s returned %s: %s", #call, moe_host_status_name(s_), \
          moe_host_last_error());                                                     \
  } while (0)

/* `got` is `want`, and the thread's message holds `part`. */
static void expect_error(const char* what, moe_status got, moe_status want, const char* part) {
  const char* message = moe_host_last_error();
  CHECK(got == want, "%s: status %s, expected %s (message: %s)", what, moe_host_status_name(got),
        moe_host_status_name(want), message);
  CHECK(strstr(message, part) != NULL, "%s: the message '%s' does not name '%s'", what, message,
        part);
}

static moe_host_registry* open_build_registry(void) {
  moe_host_registry_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.plugin_dirs = &g_plugin_dir;
  o.num_plugin_dirs = 1;
  moe_host_registry* registry = NULL;
  CHECK_OK(moe_host_registry_open(&o, &registry));
  return registry;
}

static moe_problem small_problem(void) {
  moe_problem p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  CHECK_OK(moe_host_default_problem(&p));
  capi_set_problem(&p);
  return p;
}

/* A layer of `backend` for problem `p` from `in`'s weights. */
static moe_host_layer* prepare_problem(moe_host_registry* registry, const char* backend,
                                       capi_inputs* in, const moe_problem* p) {
  const moe_weights w = capi_weights(in);
  moe_host_prepare_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.backend = backend;
  a.problem = p;
  a.weights = &w;
  moe_host_layer* layer = NULL;
  CHECK_OK(moe_host_layer_prepare(registry, &a, &layer));
  return layer;
}

static moe_host_layer* prepare(moe_host_registry* registry, const char* backend, capi_inputs* in) {
  const moe_problem p = small_problem();
  return prepare_problem(registry, backend, in, &p);
}

static void test_version(moe_host_registry* registry) {
  (void)registry;
  uint32_t host_major = 0, host_minor = 0, abi_major = 0, abi_minor = 0;
  CHECK_OK(moe_host_version(&host_major, &host_minor, &abi_major, &abi_minor));
  CHECK(host_major == MOE_HOST_VERSION_MAJOR && abi_major == MOE_ABI_VERSION_MAJOR,
        "version %u.%u, ABI %u.%u", host_major, host_minor, abi_major, abi_minor);
}

static void test_lists_the_build_plugins(moe_host_registry* registry) {
  int64_t count = 0, skipped = 0;
  CHECK_OK(moe_host_registry_plugin_count(registry, &count));
  CHECK_OK(moe_host_registry_skipped_count(registry, &skipped));
  CHECK(count >= 1, "%lld plugins found in %s", (long long)count, g_plugin_dir);
  int found_reference = 0;
  for (int64_t i = 0; i < count; ++i) {
    moe_host_plugin_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(moe_host_registry_plugin_info(registry, i, &info));
    CHECK(info.struct_size == sizeof info, "struct_size changed to %zu", info.struct_size);
    if (strcmp(info.name, "reference") != 0) continue;
    found_reference = 1;
    CHECK(*info.version != '\0' && strstr(info.path, "libmoe_reference.so") != NULL,
          "reference: version '%s', path '%s'", info.version, info.path);
    CHECK(info.memory == MOE_MEMORY_HOST && info.abi_major == MOE_ABI_VERSION_MAJOR,
          "reference: memory %d, ABI %u", info.memory, info.abi_major);
    int bf16 = 0, silu = 0;
    for (int32_t f = 0; f < info.num_formats; ++f) bf16 |= strcmp(info.formats[f], "bf16") == 0;
    for (int32_t a = 0; a < info.num_activations; ++a)
      silu |= strcmp(info.activations[a], "silu_mul") == 0;
    CHECK(bf16 && silu && info.num_routings >= 1, "reference: %d formats, %d activations",
          info.num_formats, info.num_activations);
    /* What its run() takes besides a plain run (host API 1.9): it adds into the output (ABI
     * 1.4) and routes in the call (ABI 1.6); a 1.8 caller's struct ends before the field. */
    CHECK(info.run_features == (MOE_RUN_FEATURE_ACCUMULATE | MOE_RUN_FEATURE_ROUTES),
          "reference: run features %#x", info.run_features);
    const size_t old_size = offsetof(moe_host_plugin_info, run_features);
    memset(&info, 0, sizeof info);
    info.struct_size = old_size;
    info.run_features = 0xdead;
    CHECK_OK(moe_host_registry_plugin_info(registry, i, &info));
    CHECK(info.struct_size == old_size && info.run_features == 0xdead,
          "a 1.8-sized struct: size %zu, run_features %#x", info.struct_size, info.run_features);
  }
  CHECK(found_reference, "no plugin named reference among %lld", (long long)count);
  for (int64_t i = 0; i < skipped; ++i) {
    moe_host_skipped_library s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(moe_host_registry_skipped(registry, i, &s));
    CHECK(s.path != NULL && s.reason != NULL && *s.reason != '\0', "skipped library %lld",
          (long long)i);
  }
}

static void test_selects_the_default_config(moe_host_registry* registry) {
  char path[4096];
  snprintf(path, sizeof path, "%s/configs/default.yaml", g_source_dir);
  moe_host_select_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.config_path = path;
  moe_host_selection* selection = NULL;
  CHECK_OK(moe_host_select(registry, &a, &selection));
  moe_host_selection_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(moe_host_selection_info_get(selection, &info));
  CHECK(info.backend != NULL && strcmp(info.backend, "reference") == 0, "backend '%s'",
        info.backend);
  CHECK(strstr(info.rule, "default.yaml") != NULL, "rule '%s' does not name the config", info.rule);
  CHECK(strstr(info.explanation, "selected: reference") != NULL, "explanation '%s'",
        info.explanation);
  CHECK(info.problem->experts == 8 && info.problem->hidden == 512 && info.tokens == 64,
        "problem E=%lld H=%lld, tokens %lld", (long long)info.problem->experts,
        (long long)info.problem->hidden, (long long)info.tokens);
  CHECK_OK(moe_host_selection_destroy(selection));

  /* The same from text, by auto: the reference supports it, so something is chosen. */
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.config_text = "backend: auto\nproblem: {experts: 4, top_k: 2, hidden: 64, intermediate: 32}\n";
  a.ask_every = 1;
  CHECK_OK(moe_host_select(registry, &a, &selection));
  CHECK_OK(moe_host_selection_info_get(selection, &info));
  CHECK(strstr(info.rule, "auto") != NULL, "rule '%s'", info.rule);
  CHECK_OK(moe_host_selection_destroy(selection));
  CHECK(*moe_host_last_error() == '\0', "a success leaves the message '%s'", moe_host_last_error());
}

/* Route and run through the C API in memory it allocates, and compare with the C++ API. */
static void test_runs_like_the_cpp_api(moe_host_registry* registry) {
  capi_inputs* in = malloc(sizeof *in);
  capi_results* got = calloc(1, sizeof *got);
  capi_results* want = calloc(1, sizeof *want);
  capi_make_inputs(in);
  moe_host_layer* layer = prepare(registry, "reference", in);
  if (layer == NULL) goto done;

  moe_host_layer_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(moe_host_layer_info_get(layer, &info));
  CHECK(strcmp(info.backend, "reference") == 0 && strcmp(info.router, "reference") == 0,
        "backend '%s', router '%s'", info.backend, info.router);
  CHECK(info.problem->max_tokens == CAPI_MAX_TOKENS && info.memory == MOE_MEMORY_HOST,
        "max_tokens %lld", (long long)info.problem->max_tokens);

  size_t route_ws = 0, run_ws = 0;
  CHECK_OK(moe_host_layer_route_workspace_size(layer, CAPI_TOKENS, &route_ws));
  CHECK_OK(moe_host_layer_workspace_size(layer, CAPI_TOKENS, &run_ws));
  void *logits = NULL, *hidden = NULL, *route_workspace = NULL, *run_workspace = NULL;
  CHECK_OK(moe_host_layer_alloc(layer, sizeof in->logits, &logits));
  CHECK_OK(moe_host_layer_alloc(layer, sizeof in->hidden, &hidden));
  CHECK_OK(moe_host_layer_alloc(layer, route_ws, &route_workspace));
  CHECK_OK(moe_host_layer_alloc(layer, run_ws, &run_workspace));
  CHECK_OK(
      moe_host_layer_copy(layer, logits, in->logits, sizeof in->logits, MOE_MEMCPY_HOST_TO_DEVICE));
  CHECK_OK(
      moe_host_layer_copy(layer, hidden, in->hidden, sizeof in->hidden, MOE_MEMCPY_HOST_TO_DEVICE));

  moe_route_args route;
  memset(&route, 0, sizeof route);
  route.struct_size = sizeof route;
  route.logits = capi_tensor(logits, MOE_DTYPE_F32, 2, CAPI_TOKENS, CAPI_EXPERTS, 0);
  route.topk_ids = capi_tensor(got->topk_ids, MOE_DTYPE_I32, 2, CAPI_TOKENS, CAPI_TOP_K, 0);
  route.topk_weights = capi_tensor(got->topk_weights, MOE_DTYPE_F32, 2, CAPI_TOKENS, CAPI_TOP_K, 0);
  route.workspace = route_ws ? route_workspace : NULL;
  route.workspace_size = route_ws;
  /* a problem given to route is another routing of this layer's experts: the same experts, top_k
   * and sinks, else refused naming the field */
  moe_problem other_routing = *info.problem;
  route.problem = &other_routing;
  CHECK_OK(moe_host_layer_route(layer, &route));
  other_routing.top_k = CAPI_TOP_K - 1;
  expect_error("a route problem of another top_k", moe_host_layer_route(layer, &route),
               MOE_STATUS_INVALID_ARGUMENT, "moe_route_args.problem.top_k is 1 but the layer's");
  other_routing.top_k = CAPI_TOP_K;
  other_routing.experts = 2 * CAPI_EXPERTS;
  expect_error("a route problem of other experts", moe_host_layer_route(layer, &route),
               MOE_STATUS_INVALID_ARGUMENT, "moe_route_args.problem.experts is");
  route.problem = NULL;
  CHECK_OK(moe_host_layer_route(layer, &route));

  moe_run_args run;
  memset(&run, 0, sizeof run);
  run.struct_size = sizeof run;
  run.hidden = capi_tensor(hidden, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
  run.topk_ids = route.topk_ids;
  run.topk_weights = route.topk_weights;
  run.output = capi_tensor(got->output, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
  run.workspace = run_ws ? run_workspace : NULL;
  run.workspace_size = run_ws;
  CHECK_OK(moe_host_layer_run(layer, &run));
  CHECK_OK(moe_host_layer_sync(layer, NULL));

  FILE* f = fopen(g_expected_file, "rb");
  CHECK(f != NULL, "cannot read %s (written by moe_capi_cpp_expected)", g_expected_file);
  if (f != NULL) {
    CHECK(fread(want, sizeof *want, 1, f) == 1, "%s is short", g_expected_file);
    fclose(f);
    CHECK(memcmp(got->topk_ids, want->topk_ids, sizeof got->topk_ids) == 0,
          "topk_ids differ from the C++ API's");
    CHECK(memcmp(got->topk_weights, want->topk_weights, sizeof got->topk_weights) == 0,
          "topk_weights differ from the C++ API's");
    CHECK(memcmp(got->output, want->output, sizeof got->output) == 0,
          "the output differs from the C++ API's");
    int nonzero = 0;
    for (size_t i = 0; i < CAPI_HIDDEN_COUNT; ++i) nonzero |= got->output[i] != 0;
    CHECK(nonzero, "the output is all zeros");
  }

  CHECK_OK(moe_host_layer_free(layer, logits));
  CHECK_OK(moe_host_layer_free(layer, hidden));
  CHECK_OK(moe_host_layer_free(layer, route_workspace));
  CHECK_OK(moe_host_layer_free(layer, run_workspace));

  /* Too many tokens: run, workspace and route refuse before the plugin is called. */
  run.hidden.shape[0] = CAPI_MAX_TOKENS + 1;
  expect_error("run with max_tokens + 1", moe_host_layer_run(layer, &run),
               MOE_STATUS_CAPACITY_EXCEEDED, "max_tokens=16");
  expect_error("workspace for max_tokens + 1",
               moe_host_layer_workspace_size(layer, CAPI_MAX_TOKENS + 1, &run_ws),
               MOE_STATUS_CAPACITY_EXCEEDED, "17 tokens");
  /* A copy that would wrap the address space, or whose ranges overlap, before any byte moves;
   * a failed alloc leaves NULL. */
  {
    uint8_t buf[16];
    expect_error("a copy past the address space",
                 moe_host_layer_copy(layer, buf, buf + 8, SIZE_MAX, MOE_MEMCPY_HOST_TO_DEVICE),
                 MOE_STATUS_INVALID_ARGUMENT, "run past the end of the address space");
    expect_error("an overlapping copy",
                 moe_host_layer_copy(layer, buf, buf + 4, 8, MOE_MEMCPY_HOST_TO_DEVICE),
                 MOE_STATUS_INVALID_ARGUMENT, "overlap within 8 bytes");
    void* never = buf;
    CHECK(moe_host_layer_alloc(layer, SIZE_MAX, &never) == MOE_STATUS_OUT_OF_MEMORY && !never,
          "alloc(SIZE_MAX): %s", moe_host_last_error());
  }
  /* A run_args of the wrong size. */
  run.hidden.shape[0] = CAPI_TOKENS;
  run.struct_size = 8;
  expect_error("moe_run_args too small", moe_host_layer_run(layer, &run), MOE_STATUS_ABI_MISMATCH,
               "moe_run_args.struct_size=8");
  /* A tensor the plugin refuses: its message comes through, naming the plugin. */
  run.struct_size = sizeof run;
  run.hidden.dtype = MOE_DTYPE_F32;
  const moe_status s = moe_host_layer_run(layer, &run);
  CHECK(s != MOE_STATUS_OK, "an f32 hidden was accepted");
  CHECK(strstr(moe_host_last_error(), "reference") != NULL, "message '%s'", moe_host_last_error());
  CHECK_OK(moe_host_layer_destroy(layer));
done:
  free(in);
  free(got);
  free(want);
}

static void test_describes_a_plugin(moe_host_registry* registry) {
  const moe_problem p = small_problem();
  size_t needed = 0;
  CHECK_OK(moe_host_describe(registry, "reference", &p, NULL, 0, &needed));
  char* text = malloc(needed);
  CHECK_OK(moe_host_describe(registry, "reference", &p, text, needed, &needed));
  CHECK(strstr(text, "reference  (version") != NULL && strstr(text, "supported:   yes") != NULL,
        "describe: %s", text);
  free(text);

  moe_support answer;
  memset(&answer, 0, sizeof answer);
  answer.struct_size = sizeof answer;
  CHECK_OK(moe_host_supports(registry, "reference", &p, &answer));
  CHECK(answer.supported == 1, "the reference does not support it: %s", answer.message);
  moe_problem unknown = p;
  unknown.input_format = 42; /* no such input format: the answer says so, not the last call's */
  expect_error("an unknown input format",
               moe_host_supports(registry, "reference", &unknown, &answer), MOE_STATUS_UNSUPPORTED,
               "input_format");
  CHECK(answer.supported == 0 && answer.reason != MOE_REASON_NONE &&
            strstr(answer.message, "input_format") != NULL,
        "answer after a refused problem: supported %d reason %d '%s'", answer.supported,
        answer.reason, answer.message);
  expect_error("describe an unknown plugin",
               moe_host_describe(registry, "no_such_plugin", NULL, NULL, 0, &needed),
               MOE_STATUS_NOT_FOUND, "no_such_plugin");
}

static void test_errors_name_the_problem(moe_host_registry* registry) {
  moe_host_selection* selection = NULL;
  moe_host_select_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.config_path = "/nonexistent/moe_capi.yaml";
  const moe_status bad_path = moe_host_select(registry, &a, &selection);
  CHECK(bad_path != MOE_STATUS_OK && selection == NULL, "a missing config was accepted");
  expect_error("missing config", bad_path, bad_path, "/nonexistent/moe_capi.yaml");

  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.config_text =
      "backend: no_such_backend\nproblem: {experts: 4, top_k: 2, hidden: 64, "
      "intermediate: 32}\n";
  expect_error("select an unknown backend", moe_host_select(registry, &a, &selection),
               MOE_STATUS_CONFIG_ERROR, "no_such_backend");
  a.config_text = "backend: reference\nproblme: {}\n";
  expect_error("a misspelt key", moe_host_select(registry, &a, &selection), MOE_STATUS_CONFIG_ERROR,
               "problme");
  a.config_path = "both.yaml";
  expect_error("path and text", moe_host_select(registry, &a, &selection),
               MOE_STATUS_INVALID_ARGUMENT, "exactly one of config_path and config_text");

  capi_inputs* in = malloc(sizeof *in);
  capi_make_inputs(in);
  const moe_problem p = small_problem();
  const moe_weights w = capi_weights(in);
  moe_host_prepare_args pa;
  memset(&pa, 0, sizeof pa);
  pa.struct_size = sizeof pa;
  pa.backend = "no_such_backend";
  pa.problem = &p;
  pa.weights = &w;
  moe_host_layer* layer = NULL;
  expect_error("prepare with an unknown backend", moe_host_layer_prepare(registry, &pa, &layer),
               MOE_STATUS_CONFIG_ERROR, "no_such_backend");
  CHECK(layer == NULL, "a layer was made");
  pa.backend = ""; /* NULL is auto; an empty name is refused, not taken for auto */
  expect_error("prepare with an empty backend name", moe_host_layer_prepare(registry, &pa, &layer),
               MOE_STATUS_INVALID_ARGUMENT, "moe_host_prepare_args.backend is an empty string");
  CHECK(layer == NULL, "a layer was made");
  pa.backend = "reference";
  pa.struct_size = 8;
  expect_error("prepare args too small", moe_host_layer_prepare(registry, &pa, &layer),
               MOE_STATUS_ABI_MISMATCH, "moe_host_prepare_args.struct_size=8");
  pa.struct_size = sizeof pa;
  { /* an extension chain that loops on itself, refused as the plugin ABI's are */
    moe_extension loop;
    loop.struct_size = sizeof loop;
    loop.type = 77;
    loop.next = &loop;
    pa.ext = &loop;
    expect_error("a looping extension chain", moe_host_layer_prepare(registry, &pa, &layer),
                 MOE_STATUS_INVALID_ARGUMENT, "moe_host_prepare_args.ext");
    CHECK(layer == NULL, "a layer was made");
    pa.ext = NULL;
  }
  pa.weights = NULL;
  expect_error("prepare without weights", moe_host_layer_prepare(registry, &pa, &layer),
               MOE_STATUS_INVALID_ARGUMENT, "weights is NULL");
  moe_problem bad = p;
  bad.top_k = 9;
  pa.weights = &w;
  pa.problem = &bad;
  expect_error("top_k above experts", moe_host_layer_prepare(registry, &pa, &layer),
               MOE_STATUS_INVALID_ARGUMENT, "top_k");
  free(in);

  int64_t count = 0;
  expect_error("NULL registry", moe_host_registry_plugin_count(NULL, &count),
               MOE_STATUS_INVALID_ARGUMENT, "registry is NULL");
  expect_error("NULL out", moe_host_registry_plugin_count(registry, NULL),
               MOE_STATUS_INVALID_ARGUMENT, "count is NULL");
  moe_run_args run;
  memset(&run, 0, sizeof run);
  run.struct_size = sizeof run;
  expect_error("NULL layer", moe_host_layer_run(NULL, &run), MOE_STATUS_INVALID_ARGUMENT,
               "layer is NULL");
  CHECK_OK(moe_host_layer_destroy(NULL));
  CHECK_OK(moe_host_registry_destroy(NULL));

  moe_host_plugin_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = 16;
  expect_error("plugin info too small", moe_host_registry_plugin_info(registry, 0, &info),
               MOE_STATUS_ABI_MISMATCH, "moe_host_plugin_info.struct_size=16");
  info.struct_size = sizeof info;
  expect_error("plugin index out of range", moe_host_registry_plugin_info(registry, 999, &info),
               MOE_STATUS_INVALID_ARGUMENT, "plugin index 999 is out of range");

  const char* missing = "/nonexistent/plugins";
  moe_host_registry_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.plugin_dirs = &missing;
  o.num_plugin_dirs = 1;
  moe_host_registry* other = NULL;
  expect_error("a missing plugin directory", moe_host_registry_open(&o, &other),
               MOE_STATUS_NOT_FOUND, "/nonexistent/plugins");
  /* an empty path is not the default (NULL is) */
  const char* empty = "";
  o.plugin_dirs = &empty;
  expect_error("an empty plugin directory", moe_host_registry_open(&o, &other),
               MOE_STATUS_INVALID_ARGUMENT, "plugin_dirs[0] is an empty path");
  o.num_plugin_dirs = 0;
  o.plugin_files = &empty;
  o.num_plugin_files = 1;
  expect_error("an empty plugin file", moe_host_registry_open(&o, &other),
               MOE_STATUS_INVALID_ARGUMENT, "plugin_files[0] is an empty path");
  o.num_plugin_files = 0;
  o.scanner = "";
  expect_error("an empty scanner", moe_host_registry_open(&o, &other), MOE_STATUS_INVALID_ARGUMENT,
               "scanner is an empty path");
  o.scanner = NULL;
  o.core_plugin_dir = "";
  expect_error("an empty core plugin directory", moe_host_registry_open(&o, &other),
               MOE_STATUS_INVALID_ARGUMENT, "core_plugin_dir is an empty path");
  o.core_plugin_dir = "/nonexistent/core/plugins";
  expect_error("a missing core plugin directory", moe_host_registry_open(&o, &other),
               MOE_STATUS_NOT_FOUND, "'/nonexistent/core/plugins' (from core_plugin_dir)");
}

/* A layer keeps nothing of the caller's problem but its values: an extension chain on the problem
 * is read during prepare, then freed here and the layer still answers. An output struct keeps the
 * caller's own ext (it is not an out-field). */
static void test_the_layer_keeps_nothing_of_the_callers(moe_host_registry* registry) {
  capi_inputs* in = malloc(sizeof *in);
  capi_make_inputs(in);
  moe_problem p = small_problem();
  moe_extension* chain = malloc(sizeof *chain);
  chain->struct_size = sizeof *chain;
  chain->type = 99; /* a type no one knows: skipped */
  chain->next = NULL;
  p.ext = chain;
  moe_host_layer* layer = prepare_problem(registry, "reference", in, &p);
  chain->struct_size = 0; /* what freed memory may hold */
  chain->next = (const moe_extension*)(uintptr_t)0x10;
  free(chain);
  if (layer != NULL) {
    size_t bytes = 0;
    CHECK_OK(moe_host_layer_route_workspace_size(layer, 8, &bytes));
    moe_extension mine;
    memset(&mine, 0, sizeof mine);
    moe_host_layer_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    info.ext = &mine;
    CHECK_OK(moe_host_layer_info_get(layer, &info));
    CHECK(info.ext == &mine, "the caller's ext was overwritten");
    CHECK(info.problem != NULL && info.problem->ext == NULL, "the layer kept the caller's chain");
    char text[4096];
    size_t needed = 0;
    CHECK_OK(moe_host_problem_format(info.problem, text, sizeof text, &needed));
  }
  CHECK_OK(moe_host_layer_destroy(layer));
  free(in);
}

static void test_conformance_of_a_plugin(moe_host_registry* registry) {
  char problems[4096], report[4096];
  snprintf(problems, sizeof problems, "%s/tests/capi/problems", g_source_dir);
  snprintf(report, sizeof report, "%s/capi_conformance.json", g_scratch_dir);
  remove(report);
  moe_host_conformance_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.plugin_path = g_example_plugin;
  a.problems_dir = problems;
  a.report_path = report;
  a.seed = 7;
  moe_host_conformance_summary s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CHECK_OK(moe_host_conformance(registry, &a, &s));
  CHECK(s.pass > 0 && s.fail == 0 && s.error == 0 && s.seed == 7,
        "pass %d fail %d error %d skip %d seed %llu", s.pass, s.fail, s.error, s.skip,
        (unsigned long long)s.seed);
  FILE* f = fopen(report, "r");
  CHECK(f != NULL, "no report at %s", report);
  if (f != NULL) fclose(f);

  a.plugin_path = "/nonexistent/libmoe_nothing.so";
  expect_error("conformance of a missing library", moe_host_conformance(registry, &a, &s),
               MOE_STATUS_NOT_FOUND, "/nonexistent/libmoe_nothing.so");
  /* a directory without problem files is not a suite that passed; a file is not a directory */
  char empty_dir[4096];
  snprintf(empty_dir, sizeof empty_dir, "%s/capi_no_problems", g_scratch_dir);
  mkdir(empty_dir, 0700); /* may exist from an earlier run: it stays empty */
  a.plugin_path = g_example_plugin;
  a.problems_dir = empty_dir;
  expect_error("conformance of no problems", moe_host_conformance(registry, &a, &s),
               MOE_STATUS_NOT_FOUND, "no problem files (*.yaml) in");
  a.problems_dir = report;
  expect_error("conformance of a file as the problem directory",
               moe_host_conformance(registry, &a, &s), MOE_STATUS_NOT_FOUND, "is not a directory");
}

/* A problem from a config's `problem:` text, back to JSON, and read again: the same problem. */
static void test_problems_as_text(moe_host_registry* registry) {
  (void)registry;
  moe_problem p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  CHECK_OK(moe_host_problem_parse(
      "{experts: 8, top_k: 2, hidden: 256, intermediate: 128, format: fp8_block, "
      "activation: swiglu_oai, activation_alpha: 1.702, routing: grouped_topk, num_groups: 4, "
      "topk_group: 2, ep_placement: round_robin, ep_size: 2, ep_rank: 1, max_tokens: 64}",
      &p));
  CHECK(p.struct_size == sizeof p && p.experts == 8 && p.format == MOE_FORMAT_FP8_BLOCK &&
            p.activation == MOE_ACTIVATION_SWIGLU_OAI && p.routing == MOE_ROUTING_GROUPED_TOPK,
        "experts %lld format %d activation %d routing %d", (long long)p.experts, p.format,
        p.activation, p.routing);
  CHECK(p.ep_placement == MOE_EP_ROUND_ROBIN && p.local_experts == 4 && p.ep_map == NULL,
        "placement %d, local_experts %lld", p.ep_placement, (long long)p.local_experts);
  CHECK(p.input_format == MOE_INPUT_FP8_1X128, "input_format %d: default not resolved",
        p.input_format);

  size_t needed = 0;
  CHECK_OK(moe_host_problem_format(&p, NULL, 0, &needed));
  char* text = malloc(needed);
  CHECK_OK(moe_host_problem_format(&p, text, needed, &needed));
  CHECK(strstr(text, "\"format\":\"fp8_block\"") != NULL &&
            strstr(text, "\"activation_alpha\":1.702,") != NULL &&
            strstr(text, "\"ep_placement\":\"round_robin\"") != NULL,
        "format: %s", text);
  moe_problem again;
  memset(&again, 0, sizeof again);
  again.struct_size = sizeof again;
  CHECK_OK(moe_host_problem_parse(text, &again));
  CHECK(memcmp(&again, &p, sizeof p) == 0, "%s does not read back to the same problem", text);
  free(text);

  expect_error("an unknown key", moe_host_problem_parse("{experts: 8, expertz: 2}", &p),
               MOE_STATUS_CONFIG_ERROR, "unknown key 'expertz'");
  expect_error("an unknown format",
               moe_host_problem_parse(
                   "{experts: 8, top_k: 2, hidden: 64, intermediate: 32, format: fp7}", &p),
               MOE_STATUS_CONFIG_ERROR, "format: 'fp7' is not one of");
  expect_error("a missing field", moe_host_problem_parse("{experts: 8}", &p),
               MOE_STATUS_CONFIG_ERROR, "problem needs 'top_k'");
  expect_error("an invalid problem",
               moe_host_problem_parse("{experts: 2, top_k: 3, hidden: 64, intermediate: 32}", &p),
               MOE_STATUS_CONFIG_ERROR, "top_k");
  expect_error("NULL text", moe_host_problem_parse(NULL, &p), MOE_STATUS_INVALID_ARGUMENT,
               "text is NULL");
  /* a value in a field this problem never reads that its text could not carry back: refused,
   * naming the field, rather than written as text that moe_host_problem_parse rejects */
  CHECK_OK(moe_host_problem_parse("{experts: 4, top_k: 2, hidden: 64, intermediate: 32}", &p));
  p.score_function = 42;
  expect_error("an unknown score function", moe_host_problem_format(&p, NULL, 0, &needed),
               MOE_STATUS_INVALID_ARGUMENT, "score_function=42 is not a known value");
  CHECK_OK(moe_host_problem_parse("{experts: 4, top_k: 2, hidden: 64, intermediate: 32}", &p));
  p.activation_alpha = (float)NAN;
  expect_error("a NaN alpha", moe_host_problem_format(&p, NULL, 0, &needed),
               MOE_STATUS_INVALID_ARGUMENT, "activation_alpha=nan is not finite");

  /* an expert count out of range is named before anything is sized from it: an EP map is not
   * read past its four entries, an EP placement builds no map of 2^29 entries */
  CHECK_OK(moe_host_problem_parse("{experts: 4, top_k: 2, hidden: 64, intermediate: 32}", &p));
  int32_t map[4] = {0, 1, 2, 3};
  p.ep_map = map;
  p.experts = 100000000;
  expect_error("an EP map of 10^8 experts", moe_host_problem_format(&p, NULL, 0, &needed),
               MOE_STATUS_INVALID_ARGUMENT, "experts=100000000 must be in [1, 65536]");
  p.experts = -1;
  expect_error("an EP map of -1 experts", moe_host_problem_format(&p, NULL, 0, &needed),
               MOE_STATUS_INVALID_ARGUMENT, "experts=-1 must be in [1, 65536]");
  p.ep_map = NULL;
  p.ep_placement = MOE_EP_LINEAR;
  p.ep_size = 1;
  p.experts = (int64_t)1 << 29;
  expect_error("2^29 experts placed", moe_host_problem_format(&p, NULL, 0, &needed),
               MOE_STATUS_INVALID_ARGUMENT, "experts=536870912 must be in [1, 65536]");
  p.experts = -4;
  expect_error("-4 experts placed", moe_host_problem_format(&p, NULL, 0, &needed),
               MOE_STATUS_INVALID_ARGUMENT, "experts=-4 must be in [1, 65536]");
  p.struct_size = 8;
  expect_error("problem too small", moe_host_problem_format(&p, NULL, 0, &needed),
               MOE_STATUS_ABI_MISMATCH, "struct_size=8");
}

/* Runs `layer` on the inputs' hidden states with the given routing into `out` (host memory). */
static void run_with(moe_host_layer* layer, capi_inputs* in, capi_results* r) {
  size_t bytes = 0;
  CHECK_OK(moe_host_layer_workspace_size(layer, CAPI_TOKENS, &bytes));
  void* workspace = malloc(bytes ? bytes : 1);
  moe_run_args run;
  memset(&run, 0, sizeof run);
  run.struct_size = sizeof run;
  run.hidden = capi_tensor(in->hidden, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
  run.topk_ids = capi_tensor(r->topk_ids, MOE_DTYPE_I32, 2, CAPI_TOKENS, CAPI_TOP_K, 0);
  run.topk_weights = capi_tensor(r->topk_weights, MOE_DTYPE_F32, 2, CAPI_TOKENS, CAPI_TOP_K, 0);
  run.output = capi_tensor(r->output, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
  run.workspace = workspace;
  run.workspace_size = bytes;
  CHECK_OK(moe_host_layer_run(layer, &run));
  free(workspace);
}

static moe_host_selection* select_text(moe_host_registry* registry, const char* text) {
  moe_host_select_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.config_text = text;
  moe_host_selection* selection = NULL;
  CHECK_OK(moe_host_select(registry, &a, &selection));
  return selection;
}

/* The capi_inputs weights written as a `stacked` checkpoint, loaded through the adapters by
 * moe_host_layer_prepare_checkpoint: the same output, bit for bit, as those weights prepared
 * directly, and the checkpoint's router in the layer's info. */
static void test_prepares_a_layer_from_a_checkpoint(moe_host_registry* registry) {
  capi_inputs* in = malloc(sizeof *in);
  capi_results* got = calloc(1, sizeof *got);
  capi_results* want = calloc(1, sizeof *want);
  capi_make_inputs(in);
  char path[4096], config[8192];
  snprintf(path, sizeof path, "%s/capi_checkpoint.safetensors", g_scratch_dir);
  CHECK(capi_write_checkpoint(path, in) == 0, "cannot write %s", path);
  snprintf(config, sizeof config,
           "backend: reference\nproblem: {experts: %d, top_k: %d, hidden: %d, intermediate: %d, "
           "format: bf16, activation: silu_mul, routing: softmax_topk, renormalize: true, "
           "max_tokens: %d}\ncheckpoint: {path: '%s', convention: stacked, prefix: "
           "'layers.{layer}.moe', layer: 0}\n",
           CAPI_EXPERTS, CAPI_TOP_K, CAPI_HIDDEN, CAPI_INTERMEDIATE, CAPI_MAX_TOKENS, path);
  moe_host_selection* selection = select_text(registry, config);
  moe_host_checkpoint_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.selection = selection;
  moe_host_layer* layer = NULL;
  CHECK_OK(moe_host_layer_prepare_checkpoint(registry, &a, &layer));
  moe_host_layer* direct = prepare(registry, "reference", in);
  if (layer == NULL || direct == NULL) goto done;

  moe_host_layer_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(moe_host_layer_info_get(layer, &info));
  CHECK(strcmp(info.backend, "reference") == 0 && info.real_experts == CAPI_EXPERTS,
        "backend '%s', real_experts %lld", info.backend, (long long)info.real_experts);
  CHECK(strcmp(info.router_dtype, "bf16") == 0 && strstr(info.weights_from, path) != NULL &&
            strstr(info.weights_from, "(stacked)") != NULL,
        "router_dtype '%s', weights_from '%s'", info.router_dtype, info.weights_from);
  const moe_tensor w = info.router_weight;
  CHECK(w.data != NULL && w.dtype == MOE_DTYPE_BF16 && w.ndim == 2 && w.shape[0] == CAPI_EXPERTS &&
            w.shape[1] == CAPI_HIDDEN,
        "router_weight: dtype %d ndim %d", w.dtype, w.ndim);
  int same_router = w.data != NULL;
  for (size_t i = 0; same_router && i < CAPI_ROUTER_COUNT; ++i)
    same_router = ((const uint16_t*)w.data)[i] == capi_router_value(i);
  CHECK(same_router, "router_weight differs from the checkpoint's");
  CHECK(info.router_bias.data == NULL && info.routing_bias.data == NULL, "a bias appeared");
  CHECK_OK(moe_host_layer_info_get(direct, &info));
  CHECK(info.router_weight.data == NULL && info.real_experts == 0 &&
            strcmp(info.weights_from, "weights") == 0,
        "a layer from weights: weights_from '%s'", info.weights_from);

  for (size_t t = 0; t < CAPI_TOKENS; ++t) { /* every token to experts t % E and (t + 1) % E */
    for (int j = 0; j < CAPI_TOP_K; ++j) {
      got->topk_ids[t * CAPI_TOP_K + j] = want->topk_ids[t * CAPI_TOP_K + j] =
          (int32_t)((t + (size_t)j) % CAPI_EXPERTS);
      got->topk_weights[t * CAPI_TOP_K + j] = want->topk_weights[t * CAPI_TOP_K + j] = 0.5f;
    }
  }
  run_with(layer, in, got);
  run_with(direct, in, want);
  CHECK(memcmp(got->output, want->output, sizeof got->output) == 0,
        "the checkpoint's layer differs from the same weights prepared directly");

  a.backend = "no_such_backend";
  moe_host_layer* other = NULL;
  expect_error("a backend that does not exist",
               moe_host_layer_prepare_checkpoint(registry, &a, &other), MOE_STATUS_CONFIG_ERROR,
               "no_such_backend");
  a.backend = "";
  expect_error("an empty backend name", moe_host_layer_prepare_checkpoint(registry, &a, &other),
               MOE_STATUS_INVALID_ARGUMENT, "moe_host_checkpoint_args.backend is an empty string");
  CHECK(other == NULL, "a layer was made");
  a.backend = NULL;
  a.struct_size = 8;
  expect_error("checkpoint args too small", moe_host_layer_prepare_checkpoint(registry, &a, &other),
               MOE_STATUS_ABI_MISMATCH, "moe_host_checkpoint_args.struct_size=8");
  a.struct_size = sizeof a;
  a.selection = NULL;
  expect_error("no selection", moe_host_layer_prepare_checkpoint(registry, &a, &other),
               MOE_STATUS_INVALID_ARGUMENT, "selection is NULL");
  moe_host_selection* plain = select_text(
      registry,
      "backend: reference\nproblem: {experts: 4, top_k: 2, hidden: 64, intermediate: 32}\n");
  a.selection = plain;
  expect_error(
      "a config without checkpoint:", moe_host_layer_prepare_checkpoint(registry, &a, &other),
      MOE_STATUS_CONFIG_ERROR, "no `checkpoint:` section");
  CHECK(other == NULL, "a layer was made");
  CHECK_OK(moe_host_selection_destroy(plain));
done:
  CHECK_OK(moe_host_layer_destroy(layer));
  CHECK_OK(moe_host_layer_destroy(direct));
  CHECK_OK(moe_host_selection_destroy(selection));
  remove(path);
  free(in);
  free(got);
  free(want);
}

/* Weights said to be in device memory: the placement fields are checked; host memory labelled
 * device memory is refused with the field named (or, without a driver or a GPU, the reason, in
 * the weights' terms), never read as device memory; a 1.2 caller's shorter struct means host. */
static void test_device_weights_are_checked(moe_host_registry* registry) {
  capi_inputs* in = malloc(sizeof *in);
  capi_make_inputs(in);
  const moe_problem p = small_problem();
  const moe_weights w = capi_weights(in);
  moe_host_prepare_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.backend = "reference";
  a.problem = &p;
  a.weights = &w;
  moe_host_layer* layer = NULL;
  a.weights_memory = 7;
  expect_error("weights_memory 7", moe_host_layer_prepare(registry, &a, &layer),
               MOE_STATUS_INVALID_ARGUMENT, "moe_host_prepare_args.weights_memory=7");
  a.weights_memory = MOE_MEMORY_CUDA_DEVICE;
  a.weights_device = -1;
  expect_error("weights_device -1", moe_host_layer_prepare(registry, &a, &layer),
               MOE_STATUS_INVALID_ARGUMENT, "moe_host_prepare_args.weights_device=-1");
  a.weights_device = 0;
  const moe_status labelled = moe_host_layer_prepare(registry, &a, &layer);
  const char* why = moe_host_last_error();
  CHECK(labelled == MOE_STATUS_NOT_FOUND || labelled == MOE_STATUS_DEVICE_ERROR ||
            labelled == MOE_STATUS_INVALID_ARGUMENT,
        "host memory labelled device memory: %s: %s", moe_host_status_name(labelled), why);
  CHECK(strstr(why, "weights") != NULL, "the message '%s' does not name the weights", why);
  if (labelled == MOE_STATUS_INVALID_ARGUMENT) /* a driver and a GPU: the pointer was asked */
    CHECK(strstr(why, "weights.w13") != NULL && strstr(why, "cuda:0") != NULL, "%s", why);
  CHECK(layer == NULL, "a layer was made from host memory labelled device memory");

  a.weights_memory = MOE_MEMORY_HOST;
  CHECK_OK(moe_host_layer_prepare(registry, &a, &layer));
  CHECK_OK(moe_host_layer_destroy(layer));
  layer = NULL;
  a.weights_memory = MOE_MEMORY_CUDA_DEVICE; /* beyond a 1.2 struct: not read */
  a.struct_size = offsetof(moe_host_prepare_args, weights_memory);
  CHECK_OK(moe_host_layer_prepare(registry, &a, &layer));
  CHECK_OK(moe_host_layer_destroy(layer));
  free(in);
}

/* A layer of an EP problem of one rank, from `in`'s weights. */
static moe_host_layer* prepare_ep_layer(moe_host_registry* registry, capi_inputs* in) {
  moe_problem p = small_problem();
  p.ep_placement = MOE_EP_LINEAR;
  p.ep_size = 1;
  p.ep_rank = 0;
  return prepare_problem(registry, "reference", in, &p);
}

/* Expert parallelism over the caller's communicator: its argument checks (a NULL communicator, a
 * host-memory backend, before NCCL is touched), and a one-rank step without a group, which must
 * equal the layer's own run. A libmoe_core built without EP says so (UNSUPPORTED). */
/* A one-rank device step made with `da` and run with `dr` into `stepped` (cleared first): the
 * layer's bytes `want`. */
static void expect_device_step_is_the_layer(const moe_host_ep_device_step_args* da,
                                            const moe_host_ep_device_run_args* dr,
                                            uint16_t* stepped, const void* want, const char* what) {
  moe_host_ep_device_step* step = NULL;
  memset(stepped, 0, CAPI_HIDDEN_COUNT * 2);
  CHECK_OK(moe_host_ep_device_step_create(NULL, da, &step));
  CHECK_OK(moe_host_ep_device_step_run(step, dr));
  CHECK(memcmp(stepped, want, CAPI_HIDDEN_COUNT * 2) == 0,
        "the one-rank %s device step differs from the layer's run", what);
  CHECK_OK(moe_host_ep_device_step_destroy(step));
}

static void test_expert_parallel_steps(moe_host_registry* registry) {
  capi_inputs* in = malloc(sizeof *in);
  capi_results* got = calloc(1, sizeof *got);
  capi_make_inputs(in);
  moe_host_layer* plain = prepare(registry, "reference", in);
  moe_host_layer* ep = prepare_ep_layer(registry, in);
  if (plain == NULL || ep == NULL) goto done;

  moe_host_ep_group* group = NULL;
  moe_host_ep_group_args ga;
  memset(&ga, 0, sizeof ga);
  ga.struct_size = sizeof ga;
  ga.layer = ep;
  expect_error("NULL communicator", moe_host_ep_group_create(&ga, &group),
               MOE_STATUS_INVALID_ARGUMENT, "moe_host_ep_group_args.nccl_comm is NULL");
  int not_a_communicator = 0;
  ga.nccl_comm = &not_a_communicator; /* never read: the backend is refused first */
  expect_error("a host-memory backend", moe_host_ep_group_create(&ga, &group),
               MOE_STATUS_UNSUPPORTED, "");
  CHECK(strstr(moe_host_last_error(), "keeps host memory") != NULL ||
            strstr(moe_host_last_error(), "built without expert parallelism") != NULL,
        "%s", moe_host_last_error());
  ga.layer = NULL;
  expect_error("no layer", moe_host_ep_group_create(&ga, &group), MOE_STATUS_INVALID_ARGUMENT,
               "moe_host_ep_group_args.layer is NULL");
  CHECK(group == NULL, "a group was made");
  int32_t rank = 0, world = 0;
  expect_error("rank of NULL", moe_host_ep_group_rank(NULL, &rank, &world),
               MOE_STATUS_INVALID_ARGUMENT, "group is NULL");
  CHECK_OK(moe_host_ep_group_destroy(NULL));

  /* The reference routes; the plain layer runs; the EP step must give the same bytes. */
  moe_route_args route;
  memset(&route, 0, sizeof route);
  route.struct_size = sizeof route;
  route.logits = capi_tensor(in->logits, MOE_DTYPE_F32, 2, CAPI_TOKENS, CAPI_EXPERTS, 0);
  route.topk_ids = capi_tensor(got->topk_ids, MOE_DTYPE_I32, 2, CAPI_TOKENS, CAPI_TOP_K, 0);
  route.topk_weights = capi_tensor(got->topk_weights, MOE_DTYPE_F32, 2, CAPI_TOKENS, CAPI_TOP_K, 0);
  CHECK_OK(moe_host_layer_route(plain, &route));
  size_t ws = 0;
  CHECK_OK(moe_host_layer_workspace_size(plain, CAPI_TOKENS, &ws));
  void* workspace = malloc(ws ? ws : 1);
  moe_run_args run;
  memset(&run, 0, sizeof run);
  run.struct_size = sizeof run;
  run.hidden = capi_tensor(in->hidden, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
  run.topk_ids = route.topk_ids;
  run.topk_weights = route.topk_weights;
  run.output = capi_tensor(got->output, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
  run.workspace = ws ? workspace : NULL;
  run.workspace_size = ws;
  CHECK_OK(moe_host_layer_run(plain, &run));
  free(workspace);

  uint16_t* stepped = calloc(CAPI_HIDDEN_COUNT, sizeof *stepped);
  moe_host_ep_step_args sa;
  memset(&sa, 0, sizeof sa);
  sa.struct_size = sizeof sa;
  sa.layer = ep;
  sa.hidden = run.hidden;
  sa.topk_ids = route.topk_ids;
  sa.topk_weights = route.topk_weights;
  sa.output = capi_tensor(stepped, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
  const moe_status st = moe_host_ep_step(NULL, &sa);
  if (st == MOE_STATUS_UNSUPPORTED) {
    CHECK(strstr(moe_host_last_error(), "built without expert parallelism") != NULL, "%s",
          moe_host_last_error());
  } else {
    CHECK(st == MOE_STATUS_OK, "moe_host_ep_step: %s: %s", moe_host_status_name(st),
          moe_host_last_error());
    CHECK(memcmp(stepped, got->output, CAPI_HIDDEN_COUNT * 2) == 0,
          "the one-rank EP step differs from the layer's run");
    sa.hidden.shape[1] = CAPI_HIDDEN + 1;
    expect_error("hidden of another width", moe_host_ep_step(NULL, &sa), MOE_STATUS_SHAPE_MISMATCH,
                 "moe_host_ep_step_args.hidden");
    sa.hidden.shape[1] = CAPI_HIDDEN;
    sa.hidden.shape[0] = (int64_t)1 << 40; /* refused before its rows are copied */
    expect_error("a step past max_tokens", moe_host_ep_step(NULL, &sa),
                 MOE_STATUS_CAPACITY_EXCEEDED, "1099511627776 tokens is more than");
    sa.hidden.shape[0] = CAPI_TOKENS;

    /* The device step (host API 1.5), one rank: the reference's "device" memory is host memory,
     * so the same arrays serve; the layer's bytes again, and a batch past max_tokens refused. */
    moe_host_ep_device_step* dstep = NULL;
    moe_host_ep_device_step_args da;
    memset(&da, 0, sizeof da);
    da.struct_size = sizeof da;
    da.layer = ep;
    da.max_tokens = CAPI_TOKENS;
    moe_host_ep_device_run_args dr;
    memset(&dr, 0, sizeof dr);
    dr.struct_size = sizeof dr;
    dr.hidden = run.hidden;
    dr.topk_ids = route.topk_ids;
    dr.topk_weights = route.topk_weights;
    dr.output = capi_tensor(stepped, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
    expect_device_step_is_the_layer(&da, &dr, stepped, got->output, "plain");
    /* Ragged (host API 1.6): one rank steps as before; a flag other than 0 or 1 is refused. */
    da.ragged = 1;
    expect_device_step_is_the_layer(&da, &dr, stepped, got->output, "ragged");
    da.ragged = 2;
    expect_error("ragged 2", moe_host_ep_device_step_create(NULL, &da, &dstep),
                 MOE_STATUS_INVALID_ARGUMENT, "ragged must be 0 or 1, not 2");
    da.ragged = 0;
    /* Chunked (host API 1.7): one rank has no exchanges to overlap, the layer's bytes again; a
     * count past 64 is refused. */
    da.chunks = 3;
    expect_device_step_is_the_layer(&da, &dr, stepped, got->output, "chunked");
    da.chunks = 65;
    expect_error("65 chunks", moe_host_ep_device_step_create(NULL, &da, &dstep),
                 MOE_STATUS_INVALID_ARGUMENT,
                 "chunks must be 0 to 64 (0 and 1: one chunk), not 65");
    /* A 1.6 caller's struct ends before `chunks`: what lies past its end is not read (one
     * chunk), so the 65 left there is no error. */
    da.struct_size = offsetof(moe_host_ep_device_step_args, chunks);
    expect_device_step_is_the_layer(&da, &dr, stepped, got->output, "1.6-sized");
    da.struct_size = sizeof da;
    da.chunks = 0;
    da.max_tokens = CAPI_TOKENS - 1;
    CHECK_OK(moe_host_ep_device_step_create(NULL, &da, &dstep));
    expect_error("a batch past max_tokens", moe_host_ep_device_step_run(dstep, &dr),
                 MOE_STATUS_CAPACITY_EXCEEDED, "up to 7 tokens a rank");
    CHECK_OK(moe_host_ep_device_step_destroy(dstep));
    da.max_tokens = 0;
    expect_error("max_tokens 0", moe_host_ep_device_step_create(NULL, &da, &dstep),
                 MOE_STATUS_INVALID_ARGUMENT, "max_tokens >= 1");
    da.layer = NULL;
    expect_error("a device step without a layer", moe_host_ep_device_step_create(NULL, &da, &dstep),
                 MOE_STATUS_INVALID_ARGUMENT, "moe_host_ep_device_step_args.layer is NULL");
    expect_error("a run of no step", moe_host_ep_device_step_run(NULL, &dr),
                 MOE_STATUS_INVALID_ARGUMENT, "step is NULL");
    CHECK(dstep == NULL, "a device step was made");
  }
  free(stepped);
  sa.layer = NULL;
  expect_error("a step without a layer", moe_host_ep_step(NULL, &sa), MOE_STATUS_INVALID_ARGUMENT,
               "moe_host_ep_step_args.layer is NULL");

done:
  CHECK_OK(moe_host_layer_destroy(plain));
  CHECK_OK(moe_host_layer_destroy(ep));
  free(in);
  free(got);
}

/* A registry of test_plugins/<variant> first, then the default directories. */
static moe_host_registry* open_fixture_registry(const char* variant) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/../test_plugins/%s", g_plugin_dir, variant);
  const char* dirs[] = {dir};
  moe_host_registry_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.plugin_dirs = dirs;
  o.num_plugin_dirs = 1;
  o.use_default = 1;
  moe_host_registry* registry = NULL;
  CHECK_OK(moe_host_registry_open(&o, &registry));
  return registry;
}

/* Plugin 0 of a registry from open_fixture_registry (its directory comes first), named `name`. */
static moe_host_plugin_info fixture_info(moe_host_registry* registry, const char* name) {
  moe_host_plugin_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(moe_host_registry_plugin_info(registry, 0, &info));
  CHECK(info.name != NULL && strcmp(info.name, name) == 0, "plugin 0 is '%s', not '%s'",
        info.name ? info.name : "(null)", name);
  return info;
}

/* `backend: auto` on a small problem with `extra` fields selects `backend`, its rule saying
 * `rule_part`. */
static void check_auto_selects(moe_host_registry* registry, const char* extra, const char* backend,
                               const char* rule_part) {
  char config[512];
  snprintf(config, sizeof config,
           "backend: auto\nproblem: {experts: 4, top_k: 2, hidden: 64, intermediate: 32, %s}\n",
           extra);
  moe_host_selection* selection = select_text(registry, config);
  if (selection == NULL) return;
  moe_host_selection_info chosen;
  memset(&chosen, 0, sizeof chosen);
  chosen.struct_size = sizeof chosen;
  CHECK_OK(moe_host_selection_info_get(selection, &chosen));
  CHECK(strcmp(chosen.backend, backend) == 0 && strstr(chosen.rule, rule_part) != NULL,
        "backend '%s', rule '%s'", chosen.backend, chosen.rule);
  CHECK_OK(moe_host_selection_destroy(selection));
}

/* The decode rule (ABI 1.3, host API 1.4) of fixture_decode (priority 40, and 70 for max_tokens
 * <= 8; tests/fixtures): in moe_host_plugin_info where the caller's struct holds it, in the
 * describe text, and in the rule of an auto selection at decode capacity. */
static void test_plugin_info_has_the_decode_rule(moe_host_registry* build) {
  moe_host_registry* registry = open_fixture_registry("decode");
  if (registry == NULL) return;
  moe_host_plugin_info info = fixture_info(registry, "fixture_decode");
  CHECK(info.priority == 40 && info.decode_priority == 70 && info.decode_max_tokens == 8,
        "priority %d, decode priority %d for max_tokens <= %lld", info.priority,
        info.decode_priority, (long long)info.decode_max_tokens);

  /* A 1.3 caller's struct ends before the rule: its tail is not written, its size is kept. */
  const size_t old_size = offsetof(moe_host_plugin_info, decode_max_tokens);
  memset(&info, 0, sizeof info);
  info.struct_size = old_size;
  info.decode_max_tokens = -99;
  info.decode_priority = -98;
  CHECK_OK(moe_host_registry_plugin_info(registry, 0, &info));
  CHECK(
      info.struct_size == old_size && info.decode_max_tokens == -99 && info.decode_priority == -98,
      "a 1.3-sized struct was written past its end: size %zu, %lld, %d", info.struct_size,
      (long long)info.decode_max_tokens, info.decode_priority);

  size_t needed = 0;
  CHECK_OK(moe_host_describe(registry, "fixture_decode", NULL, NULL, 0, &needed));
  char* text = malloc(needed);
  CHECK_OK(moe_host_describe(registry, "fixture_decode", NULL, text, needed, &needed));
  CHECK(strstr(text, "priority 40, decode priority 70 for max_tokens <= 8") != NULL, "describe: %s",
        text);
  free(text);

  check_auto_selects(registry, "max_tokens: 8", "fixture_decode",
                     "fixture_decode's decode priority for max_tokens <= 8");
  CHECK_OK(moe_host_registry_destroy(registry));

  /* The build's reference declares no rule. */
  int64_t count = 0;
  CHECK_OK(moe_host_registry_plugin_count(build, &count));
  for (int64_t i = 0; i < count; ++i) {
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(moe_host_registry_plugin_info(build, i, &info));
    if (strcmp(info.name, "reference") == 0)
      CHECK(info.decode_max_tokens == 0, "the reference has a decode rule up to %lld",
            (long long)info.decode_max_tokens);
  }
}

/* The decode rule's limits by format (ABI 1.5, host API 1.8) of fixture_decode_by_format (70 up to
 * 8 tokens, up to 32 with mxfp4 weights, none with fp8_block ones): in moe_host_plugin_info where
 * the caller's struct holds them, and in an auto selection of a 16-token mxfp4 layer. */
static void test_plugin_info_has_the_decode_limits_by_format(moe_host_registry* build) {
  (void)build;
  moe_host_registry* registry = open_fixture_registry("decode_by_format");
  if (registry == NULL) return;
  moe_host_plugin_info info = fixture_info(registry, "fixture_decode_by_format");
  for (int f = 0; f < MOE_DECODE_FORMATS; ++f) {
    const int64_t want = f == MOE_FORMAT_MXFP4 ? 32 : f == MOE_FORMAT_FP8_BLOCK ? -1 : 0;
    CHECK(info.decode_max_tokens_by_format[f] == want, "format %d's decode limit %lld, not %lld", f,
          (long long)info.decode_max_tokens_by_format[f], (long long)want);
  }

  /* A 1.7 caller's struct ends before the limits: its tail is not written. */
  const size_t old_size = offsetof(moe_host_plugin_info, decode_max_tokens_by_format);
  memset(&info, 0, sizeof info);
  info.struct_size = old_size;
  info.decode_max_tokens_by_format[MOE_FORMAT_MXFP4] = -99;
  CHECK_OK(moe_host_registry_plugin_info(registry, 0, &info));
  CHECK(info.struct_size == old_size && info.decode_max_tokens == 8 &&
            info.decode_max_tokens_by_format[MOE_FORMAT_MXFP4] == -99,
        "a 1.7-sized struct: size %zu, decode_max_tokens %lld, mxfp4's limit %lld",
        info.struct_size, (long long)info.decode_max_tokens,
        (long long)info.decode_max_tokens_by_format[MOE_FORMAT_MXFP4]);

  check_auto_selects(registry, "format: mxfp4, max_tokens: 16", "fixture_decode_by_format",
                     "decode priority for mxfp4 at max_tokens <= 32, here 16");
  CHECK_OK(moe_host_registry_destroy(registry));
}

typedef struct capi_case {
  const char* name;
  void (*run)(moe_host_registry* registry);
} capi_case;

static const capi_case kCases[] = {
    {"version", test_version},
    {"lists_the_build_plugins", test_lists_the_build_plugins},
    {"selects_the_default_config", test_selects_the_default_config},
    {"runs_like_the_cpp_api", test_runs_like_the_cpp_api},
    {"describes_a_plugin", test_describes_a_plugin},
    {"errors_name_the_problem", test_errors_name_the_problem},
    {"the_layer_keeps_nothing_of_the_callers", test_the_layer_keeps_nothing_of_the_callers},
    {"conformance_of_a_plugin", test_conformance_of_a_plugin},
    {"problems_as_text", test_problems_as_text},
    {"prepares_a_layer_from_a_checkpoint", test_prepares_a_layer_from_a_checkpoint},
    {"device_weights_are_checked", test_device_weights_are_checked},
    {"expert_parallel_steps", test_expert_parallel_steps},
    {"plugin_info_has_the_decode_rule", test_plugin_info_has_the_decode_rule},
    {"plugin_info_has_the_decode_limits_by_format",
     test_plugin_info_has_the_decode_limits_by_format},
};

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr,
            "usage: moe_capi_test CASE|all PLUGIN_DIR SOURCE_DIR EXPECTED_FILE "
            "EXAMPLE_PLUGIN SCRATCH_DIR\n");
    return 2;
  }
  g_plugin_dir = argv[2];
  g_source_dir = argv[3];
  g_expected_file = argv[4];
  g_example_plugin = argv[5];
  g_scratch_dir = argv[6];

  moe_host_registry* registry = open_build_registry();
  if (registry == NULL) return 1;
  int ran = 0;
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; ++i) {
    if (strcmp(argv[1], "all") != 0 && strcmp(argv[1], kCases[i].name) != 0) continue;
    kCases[i].run(registry);
    ++ran;
  }
  CHECK(ran > 0, "no case named '%s'", argv[1]);
  CHECK_OK(moe_host_registry_destroy(registry));
  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("moe_capi_test %s: every check passed\n", argv[1]);
  return 0;
}
