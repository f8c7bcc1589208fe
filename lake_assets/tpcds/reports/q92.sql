-- TPC-DS query 92: web discounts 30% above the item's average in a 90-day window, for manufacturer 350 (alias "Excess Discount Amount" renamed to a plain identifier).
SELECT sum(ws_ext_discount_amt) AS excess_discount_amount
FROM lake.tpcds.web_sales,
     lake.tpcds.item,
     lake.tpcds.date_dim
WHERE i_manufact_id = 350
  AND i_item_sk = ws_item_sk
  AND d_date BETWEEN '2000-01-27' AND cast('2000-04-26' AS date)
  AND d_date_sk = ws_sold_date_sk
  AND ws_ext_discount_amt >
    (SELECT 1.3 * avg(ws_ext_discount_amt)
     FROM lake.tpcds.web_sales,
          lake.tpcds.date_dim
     WHERE ws_item_sk = i_item_sk
       AND d_date BETWEEN '2000-01-27' AND cast('2000-04-26' AS date)
       AND d_date_sk = ws_sold_date_sk )
ORDER BY sum(ws_ext_discount_amt)
LIMIT 100
