"""What a `lake query` statement may call and contain on the Spark engine: an allow-list.

`sql_guard.tables_in` walks sqlglot's tree (Spark dialect) and lets a node through only if
it is listed here; anything else (sqlglot's `QueryTransform`, i.e. `SELECT TRANSFORM(...)
USING 'a shell command'`, a `SELECT ... INTO`, a function added by a newer engine) is
refused. A function call is checked by the name it was written with (sqlglot keeps it as
`spark_name`, see sql_guard), an operator by its sqlglot family, and the few calls sqlglot
parses by their own syntax (CAST, EXTRACT, TRIM ...) by their sqlglot type.

`SPARK_FUNCTIONS` is Sail 0.7.2's function catalogue (`spark.catalog.listFunctions()`, Spark
4's built-ins) less what reaches outside the rows of the query: the JVM (`reflect`,
`java_method`, `try_reflect`), the files a row came from (`input_file_*`), parsers of
documents that can name other files (`xpath*`, `*_xml`, `*_avro`, `*_protobuf`), the session,
engine and machine (`current_user`, `current_database`, `version`, `spark_partition_id`, ...)
and table functions (`range`: FROM reads the lake's tables only). Names the engine does not
know fail there as usual. lake_assets_tests/cli/test_sql_allowed.py checks the list against
the catalogue and runs TPC-DS's 99 queries through the guard.
"""

from sqlglot import exp

SPARK_FUNCTIONS = frozenset("""
    abs acos acosh add_months aes_decrypt aes_encrypt aggregate and any any_value approx_count_distinct
    approx_percentile array array_agg array_append array_compact array_contains array_distinct array_except
    array_insert array_intersect array_join array_max array_min array_position array_prepend array_remove
    array_repeat array_size array_sort array_union arrays_overlap arrays_zip ascii asin asinh assert_true
    atan atan2 atanh avg base64 between bigint bin binary bit_and bit_count bit_get bit_length bit_or
    bit_xor bitmap_and_agg bitmap_bit_position bitmap_bucket_number bitmap_construct_agg bitmap_count
    bitmap_or_agg bool_and bool_or boolean bround btrim cardinality case cast cbrt ceil ceiling char
    char_length character_length chr coalesce collate collation collect_list collect_set concat concat_ws
    contains conv convert_timezone corr cos cosh cot count count_if count_min_sketch covar_pop covar_samp
    crc32 csc cume_dist curdate current_date current_time current_timestamp current_timezone date date_add
    date_diff date_format date_from_unix_date date_part date_sub date_trunc dateadd datediff datepart day
    dayname dayofmonth dayofweek dayofyear decimal decode degrees dense_rank div double e element_at elt
    encode endswith equal_null every exists exp explode explode_outer expm1 extract factorial filter
    find_in_set first first_value flatten float floor forall format_number format_string from_csv from_json
    from_unixtime from_utc_timestamp get get_json_object getbit greatest grouping grouping_id hash hex
    histogram_numeric hll_sketch_agg hll_sketch_estimate hll_union hll_union_agg hour hypot if ifnull ilike
    in initcap inline inline_outer instr int is_valid_utf8 is_valid_variant is_variant_null isnan isnotnull
    isnull json_array_length json_object_keys json_tuple kll_merge_agg_bigint kll_merge_agg_double
    kll_merge_agg_float kurtosis lag last last_day last_value lcase lead least left len length levenshtein
    like listagg ln localtimestamp locate log log10 log1p log2 lower lpad ltrim luhn_check make_date
    make_dt_interval make_interval make_time make_timestamp make_timestamp_ltz make_timestamp_ntz
    make_valid_utf8 make_ym_interval map map_concat map_contains_key map_entries map_filter map_from_arrays
    map_from_entries map_keys map_values map_zip_with mask max max_by md5 mean measure median min min_by
    minute mod mode monotonically_increasing_id month monthname months_between named_struct nanvl negative
    next_day not now nth_value ntile nullif nullifzero nvl nvl2 octet_length or overlay parse_json parse_url
    percent_rank percentile percentile_approx percentile_cont percentile_disc pi pmod posexplode
    posexplode_outer position positive pow power printf quarter quote radians raise_error rand randn random
    randstr rank reduce regexp regexp_count regexp_extract regexp_extract_all regexp_instr regexp_like
    regexp_replace regexp_substr regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx
    regr_sxy regr_syy repeat replace reverse right rint rlike round row_number rpad rtrim schema_of_csv
    schema_of_json schema_of_variant schema_of_variant_agg sec second sentences sequence session_window sha
    sha1 sha2 shiftleft shiftright shiftrightunsigned shuffle sign signum sin sinh size skewness slice
    smallint some sort_array soundex space split split_part sqrt st_asbinary st_geogfromwkb st_geomfromwkb
    st_setsrid st_srid stack startswith std stddev stddev_pop stddev_samp str_to_map string string_agg
    struct substr substring substring_index sum tan tanh theta_difference theta_intersection
    theta_intersection_agg theta_sketch_agg theta_sketch_estimate theta_union theta_union_agg time
    time_bucket time_diff time_from_micros time_from_millis time_from_seconds time_to_micros time_to_millis
    time_to_seconds time_trunc timestamp timestamp_micros timestamp_millis timestamp_seconds tinyint
    to_binary to_char to_csv to_date to_json to_number to_time to_timestamp to_timestamp_ltz
    to_timestamp_ntz to_unix_timestamp to_utc_timestamp to_varchar to_variant_object transform
    transform_keys transform_values translate trim trunc try_add try_aes_decrypt try_avg try_divide
    try_element_at try_make_interval try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz
    try_mod try_multiply try_parse_json try_parse_url try_subtract try_sum try_to_binary try_to_number
    try_to_time try_to_timestamp try_url_decode try_validate_utf8 try_variant_get tuple_difference_double
    tuple_difference_integer tuple_difference_theta_double tuple_difference_theta_integer
    tuple_intersection_agg_double tuple_intersection_agg_integer tuple_intersection_double
    tuple_intersection_integer tuple_intersection_theta_double tuple_intersection_theta_integer
    tuple_sketch_agg_double tuple_sketch_agg_integer tuple_sketch_estimate_double
    tuple_sketch_estimate_integer tuple_sketch_summary_double tuple_sketch_summary_integer
    tuple_sketch_theta_double tuple_sketch_theta_integer tuple_union_agg_double tuple_union_agg_integer
    tuple_union_double tuple_union_integer tuple_union_theta_double tuple_union_theta_integer typeof ucase
    unbase64 unhex uniform unix_date unix_micros unix_millis unix_seconds unix_timestamp upper url_decode
    url_encode uuid validate_utf8 var_pop var_samp variance variant_explode variant_explode_outer
    variant_get vector_avg vector_cosine_similarity vector_inner_product vector_l2_distance vector_norm
    vector_normalize vector_sum weekday weekofyear when width_bucket window window_time xxhash64 year
    zeroifnull zip_with""".split())

#: Spark's join and partitioning hints (`/*+ BROADCAST(t) */`).
HINTS = frozenset({"broadcast", "broadcastjoin", "mapjoin", "merge", "shuffle_merge", "mergejoin", "shuffle_hash",
                   "shuffle_replicate_nl", "coalesce", "repartition", "repartition_by_range", "rebalance"})

#: Calls sqlglot parses by their own syntax (no name kept): allowed by type.
SYNTAX_FUNCTIONS: tuple[type[exp.Expr], ...] = (
    exp.Cast, exp.TryCast, exp.Extract, exp.Trim, exp.Substring, exp.StrPosition, exp.Overlay, exp.Case, exp.If,
    exp.Ceil, exp.Floor, exp.Chr, exp.Initcap, exp.Normalize, exp.Decode, exp.DecodeCase, exp.ArgMax, exp.ArgMin,
    exp.GroupConcat, exp.Quantile, exp.ApproxQuantile, exp.Transform, exp.Array, exp.Struct,
    exp.CurrentDate, exp.CurrentTimestamp,
)

#: Operators and predicates (`+`, `=`, `AND`, `LIKE`, `IN`, `EXISTS`, `BETWEEN`, ...): every member of these families.
OPERATORS: tuple[type[exp.Expr], ...] = (exp.Binary, exp.Unary, exp.Predicate)

#: The statement kinds: one query.
STATEMENTS: tuple[type[exp.Expr], ...] = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values)

#: The parts of a query.
STRUCTURE: tuple[type[exp.Expr], ...] = (
    *STATEMENTS, exp.With, exp.CTE, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Qualify, exp.Order,
    exp.Ordered, exp.Limit, exp.Offset, exp.Distinct, exp.Window, exp.WindowSpec, exp.Lateral, exp.Table,
    exp.TableAlias, exp.TableSample, exp.Version, exp.Pivot, exp.Rollup, exp.Cube, exp.GroupingSets,
    exp.Distribute, exp.Sort, exp.Cluster, exp.Hint, exp.JoinHint, exp.Tuple, exp.Alias, exp.Aliases, exp.Column,
    exp.Identifier, exp.Star, exp.Literal, exp.Null, exp.Boolean, exp.HexString, exp.DataType, exp.DataTypeParam,
    exp.Var, exp.Interval, exp.IntervalSpan, exp.Bracket, exp.Slice, exp.Lambda, exp.Filter, exp.IgnoreNulls,
    exp.RespectNulls, exp.WithinGroup, exp.Placeholder, exp.Schema,
)
